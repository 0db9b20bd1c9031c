use super::*;
use crate::simulate::report::{DisruptionEvent, Sample};

#[test]
fn the_page_embeds_the_data_and_cannot_be_closed_early_by_it() {
    let report = Report {
        scenario: "x</script><b>".into(),
        samples: vec![Sample {
            t: 60,
            nodes: 2,
            ..Default::default()
        }],
        disruption_events: vec![DisruptionEvent {
            at: 61,
            command: "Empty/default-abc".into(),
        }],
        ..Default::default()
    };
    let html = page(&report).unwrap();
    assert_eq!(html.matches("</script>").count(), 2, "{html}");
    assert!(html.contains("x&lt;/script&gt;&lt;b&gt;"));
    assert!(html.contains(r#""disruptionEvents":[{"at":61,"command":"Empty/default-abc"}]"#));
    // The one URL in the page is the SVG namespace, a name that is never fetched.
    let svg_namespace = "http://www.w3.org/2000/svg";
    assert_eq!(
        html.matches("://").count(),
        html.matches(svg_namespace).count()
    );
}
