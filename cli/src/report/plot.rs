//! The report's SVG plot: median full recovery time per failure level, one
//! bar per strategy and recovery mode (`frame` against `iterative`, online
//! against redeploy), drawn with plotters.

use super::{median, Report, ReportError};
use plotters::prelude::*;
use std::collections::BTreeMap;

/// Bar colours, one per series.
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The series: "strategy, mode" → median full recovery (ms) per level 1-4.
pub(super) fn series(report: &Report) -> BTreeMap<String, [Option<f64>; 4]> {
    let mut times: BTreeMap<String, [Vec<f64>; 4]> = BTreeMap::new();
    for f in &report.failures {
        let level = f.record.level;
        if !(1..=4).contains(&level) {
            continue;
        }
        let name = format!("{}, {}", f.record.strategy, f.mode);
        times.entry(name).or_default()[level as usize - 1].push(f.full_ms());
    }
    times
        .into_iter()
        .map(|(name, per_level)| (name, per_level.map(|v| median(&v))))
        .collect()
}

/// Draws the plot of `report` as an SVG document.
pub fn svg(report: &Report) -> Result<String, ReportError> {
    let series = series(report);
    let top = series
        .values()
        .flat_map(|s| s.iter().flatten())
        .fold(0.0f64, |a, b| a.max(*b))
        .max(1.0)
        * 1.15;
    let mut out = String::new();
    draw(&mut out, &series, top).map_err(|e| ReportError::Plot(e.to_string()))?;
    Ok(out)
}

fn draw(
    out: &mut String,
    series: &BTreeMap<String, [Option<f64>; 4]>,
    top: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(out, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Full recovery time per failure level (median)",
            ("sans-serif", 24),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(0f64..4f64, 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(9)
        .x_label_formatter(&|x| {
            let half = x - x.floor();
            if (half - 0.5).abs() < 1e-6 {
                format!("L{} failure", x.floor() as u32 + 1)
            } else {
                String::new()
            }
        })
        .y_desc("milliseconds (runtime + application recovery)")
        .draw()?;
    let n = series.len().max(1) as f64;
    let width = 0.8 / n;
    for (i, (name, per_level)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let bars = per_level.iter().enumerate().filter_map(|(level, v)| {
            v.map(|h| {
                let x0 = level as f64 + 0.1 + i as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.92, h)], colour.filled())
            })
        });
        chart
            .draw_series(bars)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    root.present()?;
    Ok(())
}
