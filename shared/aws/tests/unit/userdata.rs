use super::*;

#[test]
fn splits_a_mime_document_into_parts() {
    let doc = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n\n--BOUNDARY--\n";
    let parts = user_parts(Some(doc), "x").unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].body, "#!/bin/bash\necho hi");
    assert!(parts[0].content_type.starts_with("text/x-shellscript"));
}

#[test]
fn a_mime_part_without_headers_is_an_error() {
    let doc = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nno blank line--B--";
    assert!(user_parts(Some(doc), "x").is_err());
}

#[test]
fn types_a_plain_script_and_cloud_config() {
    let script = user_parts(Some("#!/bin/sh\ntrue"), "fallback").unwrap();
    assert!(script[0].content_type.starts_with("text/x-shellscript"));
    let cc = user_parts(Some("#cloud-config\npackages: []"), "fallback").unwrap();
    assert!(cc[0].content_type.starts_with("text/cloud-config"));
    let other = user_parts(Some("apiVersion: node.eks.aws/v1alpha1"), "fallback").unwrap();
    assert_eq!(other[0].content_type, "fallback");
}
