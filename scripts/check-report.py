#!/usr/bin/env python3
"""Checks the page of `fleetwright simulate --report` as Chromium rendered it.

Usage: check-report.py REPORT.json DOM.html SCREENSHOT.png

- DOM.html is Chromium's --dump-dom of the page: the DOM after the page's script ran. The
  script draws every plot, so an error in it leaves them out. Each of the three plots must have
  its two series with one point per sample, the timeline one marker per event of the JSON report
  (scenario steps, launches, interruptions, disruptions), and the page must say it rendered.
- SCREENSHOT.png must be a real picture: a PNG of at least 1000x1000 pixels of which at least
  2 % are neither white nor the near-white of the figure backgrounds.
Exits non-zero with the reason on the first failed check.
"""
import json
import re
import struct
import sys
import zlib


def fail(message):
    sys.exit(f"check-report: {message}")


def check_dom(report, dom):
    if 'data-rendered="true"' not in dom:
        fail("the page's script did not finish (no data-rendered on <body>)")
    samples = len(report["samples"])
    for plot in ["plot-nodes", "plot-cost", "plot-pods"]:
        match = re.search(r'<svg[^>]*data-plot="%s".*?</svg>' % plot, dom, re.S)
        if not match:
            fail(f"no SVG for {plot}")
        counts = re.findall(r'class="series" data-points="(\d+)"', match.group(0))
        if len(counts) != 2 or any(int(c) != samples for c in counts):
            fail(f"{plot}: series with {counts} points, expected two of {samples}")
    timeline = re.search(r'<svg[^>]*data-plot="timeline".*?</svg>', dom, re.S)
    if not timeline:
        fail("no timeline SVG")
    events = (len(report["steps"]) + len(report["launches"]) + len(report["interruptions"])
              + len(report["disruptionEvents"]))
    markers = timeline.group(0).count('class="event"')
    if markers != events or events == 0:
        fail(f"timeline: {markers} markers for {events} events")
    return samples, events


def png_pixels(path):
    """Decodes an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        fail(f"{path}: unexpected PNG format {header}")
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    rows, previous, i = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = previous[x]
            c = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + b) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def check_screenshot(path):
    width, height, channels, rows = png_pixels(path)
    if width < 1000 or height < 1000:
        fail(f"{path}: {width}x{height}, too small")
    inked = 0
    for row in rows:
        for x in range(0, len(row), channels):
            if min(row[x], row[x + 1], row[x + 2]) < 235:
                inked += 1
    share = inked / (width * height)
    if share < 0.02:
        fail(f"{path}: only {share:.1%} of the pixels are drawn; the page looks blank")
    return width, height, share


def main():
    report = json.load(open(sys.argv[1]))
    samples, events = check_dom(report, open(sys.argv[2]).read())
    width, height, share = check_screenshot(sys.argv[3])
    print(f"check-report: 3 plots of {samples} samples, {events} timeline events; "
          f"screenshot {width}x{height}, {share:.1%} drawn: ok")


if __name__ == "__main__":
    main()
