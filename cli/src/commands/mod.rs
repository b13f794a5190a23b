//! One module per subcommand of `frame` that needs more than a few lines.

pub mod clean;
pub mod drop;
pub mod inspect;
pub mod list;
pub mod run;
pub mod sim;
pub mod verify;
