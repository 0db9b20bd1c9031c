use super::*;

#[test]
fn a_stream_that_reads_whole_is_read_as_one() {
    let docs = documents("a: 1\n---\nb: 2\n");
    assert_eq!(docs.len(), 2);
    assert!(docs.iter().all(Result::is_ok));
}

#[test]
fn a_document_that_is_not_yaml_is_its_own_error_and_the_others_read() {
    let text = "kind: NodePool\nmetadata: {name: a}\n---\nkind: Pod\n  metadata: bad\n spec: [\n---\n--- {kind: Pod, metadata: {name: c}}\n";
    let docs = documents(text);
    let read: Vec<&Value> = docs
        .iter()
        .filter_map(|d| d.as_ref().ok())
        .map(|d| &d.0)
        .collect();
    assert!(read.iter().any(|v| v["kind"] == "NodePool"), "{docs:?}");
    assert!(
        read.iter().any(|v| v["metadata"]["name"] == "c"),
        "{docs:?}"
    );
    let errors: Vec<&String> = docs.iter().filter_map(|d| d.as_ref().err()).collect();
    assert_eq!(errors.len(), 1, "{docs:?}");
    // The line is the file's own (the bad document starts on line 4).
    assert!(errors[0].contains("line 5"), "{}", errors[0]);
}

#[test]
fn an_unreadable_document_is_named_with_the_source_and_its_number() {
    let r = unreadable_document("c.yaml", 2, "line 5 column 3: oops".into());
    assert_eq!(
        r.error,
        "c.yaml (document 2): not YAML: line 5 column 3: oops"
    );
}
