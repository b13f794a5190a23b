//! `frame sim --svg`: line charts of the simulations, drawn with plotters
//! like `frame report`'s plot. That paper's Table 3 as overhead against the
//! level-1 MTBF, one line per strategy (the paper's figures dashed), and
//! the projection as full recovery time against the node count.

use super::projection::{project, Measured};
use super::table3::{Row, PAPER};
use plotters::prelude::*;

/// Line colours, one per strategy.
const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];

/// One line: its name, colour index, whether it is dashed, and its points.
struct Line {
    name: String,
    colour: usize,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// Table 3 as overhead (s) against the level-1 MTBF (s), simulated lines
/// solid and the paper's dashed.
pub fn table3_svg(rows: &[Row]) -> Result<String, String> {
    let names = ["coordinated", "asynchronous, k = 2", "asynchronous, k = 5"];
    let mut lines = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let ours = rows
            .iter()
            .map(|r| (r.mtbf1, [r.coordinated_s, r.async_k2_s, r.async_k5_s][i]))
            .collect();
        let paper = rows
            .iter()
            .zip(PAPER)
            .map(|(r, p)| (r.mtbf1, [p.0, p.1, p.2][i]))
            .collect();
        lines.push(Line {
            name: format!("{name} (frame sim)"),
            colour: i,
            dashed: false,
            points: ours,
        });
        lines.push(Line {
            name: format!("{name} (published)"),
            colour: i,
            dashed: true,
            points: paper,
        });
    }
    draw(
        "Mean overhead of a 3600 s job, simulated and published (Table 3)",
        "MTBF of level-1 failures (s)",
        "overhead (s)",
        &lines,
        false,
    )
}

/// The projection: full recovery of a level-2 failure (ms) against nodes,
/// online with `frame` and redeployed with `iterative`, and retrieval
/// alone with each strategy.
pub fn projection_svg(m: &Measured) -> Result<String, String> {
    let mut nodes = Vec::new();
    let mut n = 16.0;
    while n <= 1024.0 {
        nodes.push(n);
        n *= 2.0;
    }
    let l2 = |f: &dyn Fn(&super::projection::Projected) -> f64| -> Vec<(f64, f64)> {
        nodes.iter().map(|n| (*n, f(&project(m, *n)[1]))).collect()
    };
    let lines = vec![
        Line {
            name: "full recovery, online + frame".into(),
            colour: 0,
            dashed: false,
            points: l2(&|p| p.online_frame_ms),
        },
        Line {
            name: "full recovery, redeploy + iterative".into(),
            colour: 1,
            dashed: false,
            points: l2(&|p| p.redeploy_iterative_ms),
        },
        Line {
            name: "retrieval, frame".into(),
            colour: 2,
            dashed: true,
            points: l2(&|p| p.frame_ms),
        },
        Line {
            name: "retrieval, iterative".into(),
            colour: 3,
            dashed: true,
            points: l2(&|p| p.iterative_ms),
        },
    ];
    draw(
        "Projected recovery of a level-2 failure (log scales)",
        "nodes",
        "time (ms)",
        &lines,
        true,
    )
}

/// The extent of every line's points: (x0, x1, y0, y1).
fn extent(lines: &[Line]) -> (f64, f64, f64, f64) {
    let mut e = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in lines.iter().flat_map(|l| &l.points) {
        e = (e.0.min(*x), e.1.max(*x), e.2.min(*y), e.3.max(*y));
    }
    e
}

/// Draws `lines`; with `log`, both axes are logarithmic (x from the first
/// to the last point, y from half the smallest value to twice the largest),
/// otherwise linear from 0.
fn draw(
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
    log: bool,
) -> Result<String, String> {
    let (x0, x1, y0, y1) = extent(lines);
    if !(x1 > x0 && y1 >= y0) || (log && !(x0 > 0.0 && y0 > 0.0)) {
        return Err("nothing to plot".into());
    }
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (960, 540)).into_drawing_area();
        let labels = (x_label, y_label);
        let drawn = if log {
            let (x, y) = ((x0..x1).log_scale(), (y0 / 2.0..y1 * 2.0).log_scale());
            plot(root, title, labels, lines, x, y)
        } else {
            plot(
                root,
                title,
                labels,
                lines,
                0f64..x1 * 1.05,
                0f64..y1.max(1.0) * 1.1,
            )
        };
        drawn.map_err(|e| e.to_string())?;
    }
    Ok(out)
}

fn plot<X, Y>(
    root: DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    (x_label, y_label): (&str, &str),
    lines: &[Line],
    x: X,
    y: Y,
) -> Result<(), Box<dyn std::error::Error>>
where
    X: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    X::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_labels(8)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()?;
    for line in lines {
        let colour = COLOURS[line.colour % COLOURS.len()];
        let style = ShapeStyle::from(&colour).stroke_width(2);
        let series = if line.dashed {
            chart.draw_series(DashedLineSeries::new(
                line.points.iter().copied(),
                8,
                6,
                style,
            ))?
        } else {
            chart.draw_series(LineSeries::new(line.points.iter().copied(), style))?
        };
        series.label(line.name.clone()).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
        });
        chart.draw_series(
            line.points
                .iter()
                .map(|p| Circle::new(*p, 3, colour.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests;
