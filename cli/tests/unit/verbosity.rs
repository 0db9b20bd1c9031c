use super::*;

#[test]
fn flags_choose_the_level() {
    assert_eq!(Level::from_flags(false, 0), Level::Normal);
    assert_eq!(Level::from_flags(true, 0), Level::Quiet);
    assert_eq!(Level::from_flags(false, 1), Level::Debug);
    assert_eq!(Level::from_flags(false, 3), Level::Trace);
    assert_eq!(
        directives("info", "debug"),
        "info,fleetwright=debug,simulate=debug"
    );
}
