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
        let error = match read(chunk) {
            Ok(docs) => {
                out.extend(docs.into_iter().map(Ok));
                continue;
            }
            // Read again behind blank lines, so that its error's line numbers are the file's
            // own (only a bad document pays for the padding).
            Err(_) => read(&("\n".repeat(first_line) + chunk))
                .err()
                .unwrap_or_default(),
        };
        if chunk.contains('\t') && error.contains("cannot start any token") {
            out.push(Err(format!(
                "{error} (a tab? YAML indents with spaces only)"
            )));
        } else {
            out.push(Err(error));
        }
    }
    out
}

/// The documents of a stream as text, split before each `---` line (and before the `%`
/// directives that precede it, which belong to the document it starts), each with the
/// (zero-based) line it starts on. Text with nothing but comments and blank lines is no
/// document.
fn split_documents(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let (mut start, mut first_line) = (0, 0);
    let mut directives: Option<(usize, usize)> = None;
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let content = line.trim_end();
        if content == "---" || content.starts_with("--- ") {
            let (at, at_line) = directives.take().unwrap_or((offset, n));
            out.push((first_line, &text[start..at]));
            (start, first_line) = (at, at_line);
        } else if content.starts_with('%') {
            directives.get_or_insert((offset, n));
        } else if !content.is_empty() && !content.starts_with('#') {
            directives = None;
        }
        offset += line.len();
    }
    out.push((first_line, &text[start..]));
    out.retain(|(_, chunk)| chunk.lines().any(has_content));
    out
}

/// A line of a document's own: not blank, a comment, or a directive.
fn has_content(line: &str) -> bool {
    let line = line.trim();
    !line.is_empty() && !line.starts_with('#') && !line.starts_with('%')
}

/// The record of a document that is not YAML: left out and named, with where it failed (the
/// reader's messages name the file).
pub(super) fn unreadable_document(number: usize, error: String) -> crate::rejected::Rejected {
    crate::rejected::Rejected {
        kind: "document".to_string(),
        name: number.to_string(),
        namespace: None,
        uid: None,
        error: format!("document {number}: not YAML: {error}"),
        kept: false,
    }
}

#[cfg(test)]
#[path = "../../tests/unit/dump_documents.rs"]
mod tests;
