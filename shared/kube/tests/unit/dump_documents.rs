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
fn an_unreadable_document_is_named_with_its_number() {
    let r = unreadable_document(2, "line 5 column 3: oops".into());
    assert_eq!(r.error, "document 2: not YAML: line 5 column 3: oops");
}

#[test]
fn a_tab_is_named_as_the_likely_cause() {
    let docs = documents("kind: Pod\n---\nkind: Pod\nspec:\n\tcontainers: []\n");
    let error = docs.iter().find_map(|d| d.as_ref().err()).unwrap();
    assert!(error.contains("a tab?"), "{error}");
}

/// A `%YAML` directive belongs to the document after it, and a comment-only header is no
/// document: the numbers stay those of the documents as written.
#[test]
fn directives_go_with_their_document_and_a_comment_header_is_none() {
    let text = "# header\n---\nkind: Pod\nmetadata: {name: a}\n%YAML 1.2\n---\nkind: Pod\nmetadata: {name: b}\n---\nkind: Pod\n  metadata: bad\n spec: [\n";
    let docs = documents(text);
    assert_eq!(docs.len(), 3, "{docs:?}");
    assert_eq!(docs[0].as_ref().unwrap().0["metadata"]["name"], "a");
    assert_eq!(docs[1].as_ref().unwrap().0["metadata"]["name"], "b");
    assert!(docs[2].is_err(), "{docs:?}");
}
