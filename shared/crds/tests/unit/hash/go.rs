use super::*;

#[test]
fn quantities_take_their_canonical_form() {
    for (given, canonical) in [
        ("20Gi", "20Gi"),
        ("1024Mi", "1Gi"),
        ("2048Gi", "2Ti"),
        ("1000M", "1G"),
        ("100G", "100G"),
        ("1.5", "1500m"),
        ("0.5Gi", "512Mi"),
        ("100", "100"),
        ("1000", "1k"),
        ("512", "512"),
        ("1e3", "1k"),
        ("0", "0"),
        ("0Gi", "0"),
        ("1Ki", "1Ki"),
        ("1000Ki", "1000Ki"),
        ("0.1Ki", "102400m"),
        ("64000G", "64T"),
    ] {
        assert_eq!(quantity_string(given).unwrap(), canonical, "{given}");
    }
    assert!(quantity_string("20 Gi").is_err());
    assert!(quantity_string("lots").is_err());
}

#[test]
fn go_durations_parse_as_go_parses_them() {
    assert_eq!(go_duration_nanos("1m30s"), Ok(90_000_000_000));
    assert_eq!(go_duration_nanos("1.5h"), Ok(5_400_000_000_000));
    assert_eq!(go_duration_nanos("-2ms"), Ok(-2_000_000));
    assert_eq!(go_duration_nanos("0"), Ok(0));
    assert!(go_duration_nanos("5").is_err());
    assert!(go_duration_nanos("1d").is_err());
    assert!(go_duration_nanos("").is_err());
}

#[test]
fn json_is_written_as_go_writes_it() {
    let value: Value = serde_json::from_str(
        r#"{"b": [1, -2, 0.5, 110.0, 1e21, 1.5e-7, 1e20, -0.0, 18446744073709551615],
                "a": {"z": null, "y": true}, "<&>": "tab\t\u0001\u2028é\"\\"}"#,
    )
    .unwrap();
    // Go: json.Marshal of the same text read into interface{} with UseNumber's int64 rule.
    assert_eq!(
        go_json(&value),
        r#"{"\u003c\u0026\u003e":"tab\t\u0001\u2028é\"\\","a":{"y":true,"z":null},"b":[1,-2,0.5,110,1e+21,1.5e-7,100000000000000000000,-0,18446744073709552000]}"#
    );
}

#[test]
fn fnv_is_go_fnv64_not_fnv64a() {
    // Go: fnv.New64().Write([]byte("a")).Sum64()
    assert_eq!(fnv(b"a"), 0xaf63_bd4c_8601_b7be);
    assert_eq!(fnv(b""), 0xcbf2_9ce4_8422_2325);
}

#[test]
fn zero_fields_are_left_out_and_ignored_fields_still_count_for_zero() {
    let with_empty = Go::Struct("S", vec![Field::new("A", Go::str(""))]);
    let bare = Go::Struct("S", vec![]);
    assert_eq!(hash(&with_empty), hash(&bare));
    let nested = |ignored: Go| {
        Go::Struct(
            "Outer",
            vec![Field::new(
                "Inner",
                Go::Struct("Inner", vec![Field::ignored("X", ignored)]),
            )],
        )
    };
    assert_ne!(hash(&nested(Go::str("set"))), hash(&nested(Go::str(""))));
    let map = |m: Option<Vec<(Go, Go)>>| Go::Struct("S", vec![Field::new("M", Go::Map(m))]);
    assert_ne!(hash(&map(Some(vec![]))), hash(&map(None)));
}
