//! The documents of a file, each read on its own when the stream as a whole does not read, so
//! that one document that is not YAML leaves the others to read.

use serde_json::Value;

type Document = Result<(Value, Vec<Vec<crate::strict::Step>>), String>;

/// The documents of a YAML (or JSON) stream. A syntax error ends a YAML stream for its parser,
/// so a stream that does not read whole is read again a document at a time (split at each
/// `---`): the bad document is its own error, and every other still reads.
pub(super) fn documents(text: &str) -> Vec<Document> {
    let read = |text: &str| -> Result<Vec<_>, String> {
        (serde_yaml::Deserializer::from_str(text))
            .map(|d| crate::strict::document(d).map_err(|e| e.to_string()))
            .collect()
    };
    if let Ok(whole) = read(text) {
        return whole.into_iter().map(Ok).collect();
    }
    let mut out = Vec::new();
    for (first_line, chunk) in split_documents(text) {
        // Blank lines before the document keep its errors' line numbers the file's own.
        let padded = "\n".repeat(first_line) + chunk;
        match read(&padded) {
            Ok(docs) => out.extend(docs.into_iter().map(Ok)),
            Err(e) => out.push(Err(e)),
        }
    }
    out
}

/// The text between `---` lines, each with the (zero-based) line it starts on.
fn split_documents(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let (mut start, mut first_line) = (0, 0);
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let marker = line.trim_end();
        if marker == "---" || marker.starts_with("--- ") {
            out.push((first_line, &text[start..offset]));
            // A document may start on its marker's line (`--- {kind: Pod}`).
            (start, first_line) = (offset + 3, n);
        }
        offset += line.len();
    }
    out.push((first_line, &text[start..]));
    out
}

/// The record of a document that is not YAML: left out and named, with where it failed.
pub(super) fn unreadable_document(
    source: &str,
    number: usize,
    error: String,
) -> crate::rejected::Rejected {
    crate::rejected::Rejected {
        kind: "document".to_string(),
        name: number.to_string(),
        namespace: None,
        uid: None,
        error: format!("{source} (document {number}): not YAML: {error}"),
    }
}

#[cfg(test)]
#[path = "../../tests/unit/dump_documents.rs"]
mod tests;
