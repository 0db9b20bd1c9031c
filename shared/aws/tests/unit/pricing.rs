use super::*;

fn document(instance_type: &str, currency: &str, price: &str) -> String {
    serde_json::json!({
            "product": {"productFamily": "Compute Instance", "attributes": {"instanceType": instance_type, "operatingSystem": "Linux"}},
            "terms": {"OnDemand": {"SKU.TERM": {"priceDimensions": {"SKU.TERM.DIM": {"unit": "Hrs", "pricePerUnit": {currency: price}}}}}}
        })
        .to_string()
}

#[test]
fn a_product_document_gives_its_type_and_hourly_price() {
    assert_eq!(
        price_item(&document("m5.large", "USD", "0.1070000000"), "USD"),
        Some(("m5.large".into(), 0.107))
    );
    assert_eq!(
        price_item(&document("m5.large", "CNY", "0.7"), "CNY"),
        Some(("m5.large".into(), 0.7))
    );
    assert_eq!(price_item(&document("m5.large", "CNY", "0.7"), "USD"), None);
    assert_eq!(
        price_item(&document("m5.large", "USD", "0.0000000000"), "USD"),
        None
    );
    assert_eq!(price_item(&document("", "USD", "1"), "USD"), None);
    assert_eq!(price_item("{not json", "USD"), None);
}

#[test]
fn unlisted_types_follow_the_regions_prices_and_implausible_ones_are_not_believed() {
    let mut catalog = Catalog::embedded().clone();
    let table = catalog.on_demand.clone();
    // A region 20 % dearer than us-east-1, whose list prices every type but two, one at
    // an impossible price, one at infinity.
    let mut list: OnDemandPriceList = table
        .iter()
        .filter(|(t, _)| !["m5.large", "c5.large"].contains(&t.as_str()))
        .map(|(t, p)| (t.clone(), p * 1.2))
        .collect();
    list.insert("r5.large".into(), 1e-9);
    list.insert("r5.xlarge".into(), f64::INFINITY);
    apply_on_demand_prices(&mut catalog, &list);
    let price = |t: &str| catalog.on_demand[t];
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(
        close(price("m5.large"), table["m5.large"] * 1.2),
        "unlisted, scaled"
    );
    assert!(
        close(price("r5.large"), table["r5.large"] * 1.2),
        "not believed, scaled"
    );
    assert!(close(price("r5.xlarge"), table["r5.xlarge"] * 1.2));
    assert!(
        close(price("m6i.large"), table["m6i.large"] * 1.2),
        "listed"
    );
    assert_eq!(catalog.on_demand_prices, OnDemandPrices::PriceList);
}

#[test]
fn each_region_is_priced_by_an_endpoint_that_serves_it() {
    assert_eq!(price_list_region("us-west-2"), "us-east-1");
    assert_eq!(price_list_region("eu-west-1"), "eu-central-1");
    assert_eq!(price_list_region("ap-northeast-2"), "ap-south-1");
    assert_eq!(price_list_region("cn-north-1"), "cn-northwest-1");
    assert_eq!(currency("cn-north-1"), "CNY");
    assert_eq!(currency("sa-east-1"), "USD");
}
