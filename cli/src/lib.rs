//! The library half of the `frame` command-line tool: what `frame report`
//! and `frame sim` compute, usable from programs and benches.
//!
//! - [`report`]: the five recovery metrics per failure, read from metrics
//!   files, as a table and a plot.
//! - [`sim`]: a simulated job that fails, under each recovery strategy.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

pub mod report;
pub mod sim;
