use super::closed_pipe;
use std::io::{Error, ErrorKind};

#[test]
fn only_a_bare_broken_pipe_is_a_reader_that_stopped_early() {
    let bare = || anyhow::Error::from(Error::from(ErrorKind::BrokenPipe));
    assert!(closed_pipe(&bare()));
    assert!(!closed_pipe(&bare().context("writing the peer's input")));
    assert!(!closed_pipe(&anyhow::Error::from(Error::from(
        ErrorKind::NotFound
    ))));
    assert!(!closed_pipe(&anyhow::anyhow!("Broken pipe")));
}
