"""moto's server, with the EC2 capacity reservations and placement groups moto 5.1 lacks.

Fleetwright resolves an EC2NodeClass's `capacityReservationSelectorTerms` with
DescribeCapacityReservations, through the real aws-sdk-ec2 client. moto has no capacity
reservations, so this adds the two calls the tests need to its EC2 responses, on moto's own
per-account, per-region backends: CreateCapacityReservation (instance type, zone, count, match
criteria, end date, tags) and DescribeCapacityReservations (by id, and the `state`,
`instance-type`, `availability-zone` and `tag:<key>` filters), answered in EC2's query-protocol
XML. An EC2NodeClass's `placementGroupSelector` is resolved with DescribePlacementGroups, which
moto lacks too: CreatePlacementGroup (name, strategy, partition count) and
DescribePlacementGroups (by name or id; an unknown one is EC2's `InvalidPlacementGroup.Unknown`).
moto has no AWS Price List API either: GetProducts answers from the embedded us-east-1 on-demand
table (`shared/core/data/ondemand-prices-us-east-1.csv.gz`) in the API's shape (JSON 1.1, product
documents as strings, 100 a page with a `NextToken`), honouring the `regionCode` and `tenancy`
filters (bare metal is `Dedicated`); any other region has no products. Everything else is moto's. Run it as moto_server is run:

    .venv-moto/bin/python scripts/moto-server.py -H 127.0.0.1 -p 5000
"""

import csv
import datetime
import gzip
import json
import os
import sys
import uuid
from xml.sax.saxutils import escape

from moto.ec2.responses import EC2Response
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.server import main

NAMESPACE = "http://ec2.amazonaws.com/doc/2016-11-15/"


def _response(action, body):
    """An EC2 query-protocol response: `<{action}Response>` with a request id and `body`."""
    return (
        f'<{action}Response xmlns="{NAMESPACE}">'
        f"<requestId>{uuid.uuid4()}</requestId>{body}</{action}Response>"
    )


def _reservations(backend):
    """The reservations of one account and region, kept on moto's backend."""
    if not hasattr(backend, "fleetwright_capacity_reservations"):
        backend.fleetwright_capacity_reservations = {}
    return backend.fleetwright_capacity_reservations


def _item(r):
    tags = "".join(
        f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>"
        for k, v in r["tags"].items()
    )
    end = f"<endDate>{r['end']}</endDate>" if r["end"] else ""
    return (
        f"<capacityReservationId>{r['id']}</capacityReservationId>"
        f"<ownerId>{r['owner']}</ownerId>"
        f"<instanceType>{escape(r['type'])}</instanceType>"
        f"<instancePlatform>Linux/UNIX</instancePlatform>"
        f"<availabilityZone>{escape(r['zone'])}</availabilityZone>"
        f"<tenancy>default</tenancy>"
        f"<totalInstanceCount>{r['count']}</totalInstanceCount>"
        f"<availableInstanceCount>{r['count']}</availableInstanceCount>"
        f"<state>{r['state']}</state>"
        f"<startDate>{r['start']}</startDate>{end}"
        f"<endDateType>{'limited' if r['end'] else 'unlimited'}</endDateType>"
        f"<instanceMatchCriteria>{r['criteria']}</instanceMatchCriteria>"
        f"<reservationType>{r['kind']}</reservationType>"
        f"<tagSet>{tags}</tagSet>"
    )


def create_capacity_reservation(self):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    tags = self._parse_tag_specification().get("capacity-reservation", {})
    r = {
        "id": "cr-" + uuid.uuid4().hex[:17],
        "owner": self.current_account,
        "type": self._get_param("InstanceType"),
        "zone": self._get_param("AvailabilityZone"),
        "count": self._get_int_param("InstanceCount", 1),
        "criteria": self._get_param("InstanceMatchCriteria") or "open",
        "end": self._get_param("EndDate"),
        "start": now,
        "state": "active",
        "kind": "default",
        "tags": dict(tags),
    }
    _reservations(self.ec2_backend)[r["id"]] = r
    return _response(
        "CreateCapacityReservation", f"<capacityReservation>{_item(r)}</capacityReservation>"
    )


def _matches(r, filters):
    fields = {"state": r["state"], "instance-type": r["type"], "availability-zone": r["zone"]}
    for name, values in filters.items():
        if name.startswith("tag:"):
            value = r["tags"].get(name[4:])
        else:
            value = fields.get(name)
        if value not in values:
            return False
    return True


def describe_capacity_reservations(self):
    ids = self._get_param("CapacityReservationIds", [])
    filters = self._filters_from_querystring()
    found = [
        r
        for r in _reservations(self.ec2_backend).values()
        if (not ids or r["id"] in ids) and _matches(r, filters)
    ]
    items = "".join(f"<item>{_item(r)}</item>" for r in found)
    return _response(
        "DescribeCapacityReservations", f"<capacityReservationSet>{items}</capacityReservationSet>"
    )


def _placement_groups(backend):
    """The placement groups of one account and region, kept on moto's backend."""
    if not hasattr(backend, "fleetwright_placement_groups"):
        backend.fleetwright_placement_groups = {}
    return backend.fleetwright_placement_groups


def _group_item(g):
    partitions = (
        f"<partitionCount>{g['partitions']}</partitionCount>" if g["partitions"] else ""
    )
    return (
        f"<groupName>{escape(g['name'])}</groupName>"
        f"<state>available</state>"
        f"<strategy>{escape(g['strategy'])}</strategy>{partitions}"
        f"<groupId>{g['id']}</groupId>"
        f"<groupArn>arn:aws:ec2:{g['region']}:{g['owner']}:placement-group/{escape(g['name'])}</groupArn>"
        f"<tagSet></tagSet>"
    )


def create_placement_group(self):
    g = {
        "id": "pg-" + uuid.uuid4().hex[:17],
        "name": self._get_param("GroupName"),
        "strategy": self._get_param("Strategy") or "cluster",
        "partitions": self._get_int_param("PartitionCount", 0),
        "owner": self.current_account,
        "region": self.region,
    }
    _placement_groups(self.ec2_backend)[g["name"]] = g
    return _response("CreatePlacementGroup", f"<placementGroup>{_group_item(g)}</placementGroup>")


def describe_placement_groups(self):
    from moto.ec2.exceptions import EC2ClientError

    names = self._get_param("GroupNames", [])
    ids = self._get_param("GroupIds", [])
    groups = list(_placement_groups(self.ec2_backend).values())
    for wanted, key in ((names, "name"), (ids, "id")):
        for w in wanted:
            if not any(g[key] == w for g in groups):
                raise EC2ClientError(
                    "InvalidPlacementGroup.Unknown", f"The Placement Group '{w}' is unknown."
                )
    found = [
        g
        for g in groups
        if (not names or g["name"] in names) and (not ids or g["id"] in ids)
    ]
    items = "".join(f"<item>{_group_item(g)}</item>" for g in found)
    return _response("DescribePlacementGroups", f"<placementGroupSet>{items}</placementGroupSet>")


EC2Response.create_placement_group = create_placement_group
EC2Response.describe_placement_groups = describe_placement_groups
EC2Response.create_capacity_reservation = create_capacity_reservation
EC2Response.describe_capacity_reservations = describe_capacity_reservations

PRICE_TABLE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..",
    "shared",
    "core",
    "data",
    "ondemand-prices-us-east-1.csv.gz",
)
PAGE = 100


def _price_table():
    with gzip.open(PRICE_TABLE, "rt") as f:
        return [(row[0], row[1]) for row in csv.reader(f) if len(row) == 2 and "." in row[0]]


def _product(instance_type, price, tenancy):
    sku = uuid.uuid5(uuid.NAMESPACE_OID, instance_type).hex[:16].upper()
    term = f"{sku}.JRTCKXETXF"
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance (bare metal)"
                if tenancy == "Dedicated"
                else "Compute Instance",
                "attributes": {
                    "instanceType": instance_type,
                    "regionCode": "us-east-1",
                    "location": "US East (N. Virginia)",
                    "operatingSystem": "Linux",
                    "tenancy": tenancy,
                    "preInstalledSw": "NA",
                    "capacitystatus": "Used",
                    "marketoption": "OnDemand",
                    "servicecode": "AmazonEC2",
                },
                "sku": sku,
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    term: {
                        "priceDimensions": {
                            f"{term}.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": price},
                            }
                        },
                        "sku": sku,
                        "offerTermCode": "JRTCKXETXF",
                    }
                }
            },
        }
    )


def get_products(body):
    """GetProducts over the embedded table, filtered by region and tenancy, paginated."""
    filters = {f["Field"]: f["Value"] for f in body.get("Filters", [])}
    tenancy = filters.get("tenancy", "Shared")
    rows = []
    if filters.get("regionCode", "us-east-1") == "us-east-1":
        rows = [
            (t, p)
            for t, p in _price_table()
            if (t.endswith(".metal") or "metal-" in t) == (tenancy == "Dedicated")
        ]
    start = int(body.get("NextToken") or 0)
    size = min(int(body.get("MaxResults") or PAGE), PAGE)
    page = {
        "FormatVersion": "aws_v1",
        "PriceList": [_product(t, p, tenancy) for t, p in rows[start : start + size]],
    }
    if start + size < len(rows):
        page["NextToken"] = str(start + size)
    return page


_dispatch = DomainDispatcherApplication.__call__


def _call(self, environ, start_response):
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if not target.startswith("AWSPriceListService."):
        return _dispatch(self, environ, start_response)
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = json.loads(environ["wsgi.input"].read(length) or b"{}")
    if target.endswith(".GetProducts"):
        status, answer = "200 OK", get_products(body)
    else:
        status = "400 Bad Request"
        answer = {"__type": "InvalidParameterException", "message": f"{target} is not served"}
    data = json.dumps(answer).encode()
    start_response(
        status,
        [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(data)))],
    )
    return [data]


DomainDispatcherApplication.__call__ = _call

if __name__ == "__main__":
    sys.exit(main())
