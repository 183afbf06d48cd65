//! The report's plots as SVG text, drawn with plotters' SVG backend (no
//! fonts are loaded: plotters writes `<text>` elements and the browser sets
//! them).

use super::GenerationPoint;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::ops::Range;

const SIZE: (u32, u32) = (720, 380);
const TRAIN: RGBColor = RGBColor(31, 119, 180);
const VALIDATED: RGBColor = RGBColor(44, 160, 44);
const FRONT: RGBColor = RGBColor(214, 39, 40);
const OTHERS: RGBColor = RGBColor(170, 170, 170);
const WITHOUT: RGBColor = RGBColor(255, 127, 14);

/// Plotters' errors carry the backend's; a report says which plot failed.
fn failed(what: &str, e: impl std::fmt::Display) -> String {
    format!("the {what} plot: {e}")
}

/// A range around `values` with a margin, never empty.
fn range(values: impl Iterator<Item = f64>, floor: Option<f64>) -> (f64, f64) {
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() || !hi.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    // All zero (errors of exact variants): a unit range, not a sliver.
    let pad = if hi == 0.0 && lo == 0.0 {
        1.0
    } else {
        ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-12)
    };
    let lo = floor.map_or(lo - pad, |f| (lo - pad).max(f));
    (lo, hi + pad)
}

/// The canvas a plot draws on.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// A chart of f64 over f64 on an [`Area`].
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One plot as SVG text: `draw` on a white canvas of [`SIZE`]; errors name
/// the plot (`what`).
fn svg(what: &str, draw: impl FnOnce(&Area) -> Result<(), String>) -> Result<String, String> {
    svg_sized(what, SIZE, draw)
}

/// As [`svg`], on a canvas of `size`.
fn svg_sized(
    what: &str,
    size: (u32, u32),
    draw: impl FnOnce(&Area) -> Result<(), String>,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| failed(what, e))?;
        draw(&root)?;
        root.present().map_err(|e| failed(what, e))?;
    }
    Ok(svg)
}

/// A chart over `x` by `y` with its axes named (`desc`: x's, y's) and no
/// light grid lines; `y_labels` formats the y axis (else plotters' format).
fn chart<'a, 'b>(
    root: &'a Area<'b>,
    what: &str,
    (x, y): (Range<f64>, Range<f64>),
    y_label_area: u32,
    desc: (&str, &str),
    y_labels: Option<&dyn Fn(&f64) -> String>,
) -> Result<Chart<'a, 'b>, String> {
    let mut chart = ChartBuilder::on(root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(y_label_area)
        .build_cartesian_2d(x, y)
        .map_err(|e| failed(what, e))?;
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(desc.0)
        .y_desc(desc.1)
        .light_line_style(WHITE.mix(0.0));
    if let Some(format) = y_labels {
        mesh.y_label_formatter(format);
    }
    mesh.draw().map_err(|e| failed(what, e))?;
    Ok(chart)
}

/// The series' legend, upper right.
fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, what: &str) -> Result<(), String> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(OTHERS)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| failed(what, e))
}

/// Best train and validated cost ratio per generation, with the original's 1.0.
pub fn cost(points: &[GenerationPoint]) -> Result<String, String> {
    svg("cost", |root| {
        let last = points.last().map_or(1, |p| p.generation.max(1));
        let values = points
            .iter()
            .flat_map(|p| [p.best_train, p.best_validated])
            .flatten()
            .chain([1.0]);
        let (lo, hi) = range(values, Some(0.0));
        let mut chart = chart(
            root,
            "cost",
            (0f64..last as f64, lo..hi),
            60,
            ("generation", "cost ratio (variant / original)"),
            None,
        )?;
        chart
            .draw_series(LineSeries::new(
                [(0.0, 1.0), (last as f64, 1.0)],
                OTHERS.stroke_width(1),
            ))
            .map_err(|e| failed("cost", e))?
            .label("original")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], OTHERS));
        let train: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| Some((p.generation as f64, p.best_train?)))
            .collect();
        chart
            .draw_series(LineSeries::new(train.clone(), TRAIN.stroke_width(2)))
            .map_err(|e| failed("cost", e))?
            .label("best train")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], TRAIN.stroke_width(2)));
        chart
            .draw_series(train.iter().map(|&p| Circle::new(p, 2, TRAIN.filled())))
            .map_err(|e| failed("cost", e))?;
        let validated: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| Some((p.generation as f64, p.best_validated?)))
            .collect();
        chart
            .draw_series(LineSeries::new(
                validated.clone(),
                VALIDATED.stroke_width(2),
            ))
            .map_err(|e| failed("cost", e))?
            .label("best validated (held-out)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], VALIDATED.stroke_width(2)));
        chart
            .draw_series(
                validated
                    .iter()
                    .map(|&p| Circle::new(p, 3, VALIDATED.filled())),
            )
            .map_err(|e| failed("cost", e))?;
        legend(&mut chart, "cost")
    })
}

/// The Pareto front over (cost ratio, error), over the last population.
pub fn pareto(front: &[(f64, f64)], population: &[(f64, f64)]) -> Result<String, String> {
    svg("Pareto", |root| {
        let all = || front.iter().chain(population);
        let (x_lo, x_hi) = range(all().map(|p| p.0), Some(0.0));
        let (_, y_hi) = range(all().map(|p| p.1), Some(0.0));
        let y_labels = |v: &f64| {
            if y_hi >= 0.01 {
                format!("{v:.2}")
            } else {
                format!("{v:.1e}")
            }
        };
        let mut chart = chart(
            root,
            "Pareto",
            (x_lo..x_hi, 0f64..y_hi),
            70,
            (
                "train cost ratio (variant / original)",
                "error (largest output difference)",
            ),
            Some(&y_labels),
        )?;
        chart
            .draw_series(
                population
                    .iter()
                    .map(|&p| Circle::new(p, 3, OTHERS.filled())),
            )
            .map_err(|e| failed("Pareto", e))?
            .label("last population")
            .legend(|(x, y)| Circle::new((x + 8, y), 3, OTHERS.filled()));
        chart
            .draw_series(LineSeries::new(front.to_vec(), FRONT.stroke_width(1)))
            .map_err(|e| failed("Pareto", e))?;
        chart
            .draw_series(front.iter().map(|&p| Circle::new(p, 5, FRONT.filled())))
            .map_err(|e| failed("Pareto", e))?
            .label("Pareto front")
            .legend(|(x, y)| Circle::new((x + 8, y), 5, FRONT.filled()));
        legend(&mut chart, "Pareto")
    })
}

/// Evaluations per second of each generation over the search's wall time;
/// `None` when no generation was timed.
pub fn rate(points: &[GenerationPoint]) -> Result<Option<String>, String> {
    let mut elapsed = 0.0;
    let mut series: Vec<(f64, f64)> = Vec::new();
    for p in points {
        let Some(s) = p.seconds.filter(|s| *s > 0.0) else {
            continue;
        };
        elapsed += s;
        series.push((elapsed, p.evaluations as f64 / s));
    }
    if series.is_empty() {
        return Ok(None);
    }
    svg("rate", |root| {
        let (_, x_hi) = range(series.iter().map(|p| p.0), Some(0.0));
        let (_, y_hi) = range(series.iter().map(|p| p.1), Some(0.0));
        let mut chart = chart(
            root,
            "rate",
            (0f64..x_hi, 0f64..y_hi),
            60,
            ("seconds of search", "evaluations / s"),
            None,
        )?;
        chart
            .draw_series(LineSeries::new(series.clone(), TRAIN.stroke_width(2)))
            .map_err(|e| failed("rate", e))?;
        chart
            .draw_series(series.iter().map(|&p| Circle::new(p, 2, TRAIN.filled())))
            .map_err(|e| failed("rate", e))?;
        Ok(())
    })
    .map(Some)
}

/// Edit contributions: per edit, the cost ratio of the edit alone and of
/// the patch without it, each with its 95% interval, against the full
/// patch's and the original's. Subsets that fail a test have no point
/// (the table says why).
pub fn contributions(c: &gevo_search::contrib::Contributions) -> Result<String, String> {
    let what = "contributions";
    svg(what, |root| {
        let n = c.edits.len();
        let points =
            |f: fn(&gevo_search::contrib::EditContribution) -> &gevo_search::contrib::Outcome| {
                c.edits
                    .iter()
                    .filter_map(move |e| Some(((e.index + 1) as f64, f(e).cost()?)))
                    .collect::<Vec<_>>()
            };
        let alone = points(|e| &e.alone);
        let without = points(|e| &e.without);
        let values = alone
            .iter()
            .chain(&without)
            .flat_map(|(_, i)| [i.lo, i.hi])
            .chain([1.0, c.full.lo, c.full.hi]);
        let (lo, hi) = range(values, Some(0.0));
        let x_labels = |x: &f64| {
            let k = x.round();
            if (x - k).abs() < 1e-9 && k >= 1.0 {
                format!("#{k}")
            } else {
                String::new()
            }
        };
        let mut chart = ChartBuilder::on(root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.5f64..n as f64 + 0.5, lo..hi)
            .map_err(|e| failed(what, e))?;
        chart
            .configure_mesh()
            .x_desc("edit")
            .y_desc("cost ratio (variant / original)")
            .x_labels(n + 1)
            .x_label_formatter(&x_labels)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| failed(what, e))?;
        let flat = |y: f64| [(0.5, y), (n as f64 + 0.5, y)];
        chart
            .draw_series(LineSeries::new(flat(1.0), OTHERS.stroke_width(1)))
            .map_err(|e| failed(what, e))?
            .label("original")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], OTHERS));
        chart
            .draw_series(LineSeries::new(
                flat(c.full.estimate),
                VALIDATED.stroke_width(2),
            ))
            .map_err(|e| failed(what, e))?
            .label("full patch")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], VALIDATED.stroke_width(2)));
        for (series, offset, colour, label) in [
            (&alone, -0.12, TRAIN, "edit alone"),
            (&without, 0.12, WITHOUT, "patch without the edit"),
        ] {
            chart
                .draw_series(series.iter().flat_map(|(x, i)| {
                    // The interval: a vertical bar with caps (a point on the
                    // simulator, where lo = hi).
                    let x = x + offset;
                    let style = colour.stroke_width(2);
                    [
                        PathElement::new([(x, i.lo), (x, i.hi)], style),
                        PathElement::new([(x - 0.04, i.lo), (x + 0.04, i.lo)], style),
                        PathElement::new([(x - 0.04, i.hi), (x + 0.04, i.hi)], style),
                    ]
                }))
                .map_err(|e| failed(what, e))?;
            chart
                .draw_series(
                    series
                        .iter()
                        .map(|(x, i)| Circle::new((x + offset, i.estimate), 5, colour.filled())),
                )
                .map_err(|e| failed(what, e))?
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 8, y), 5, colour.filled()));
        }
        legend(&mut chart, what)
    })
}

/// One configuration of a tuned spec on the launch plot: its constants and
/// its original's cost ratio to the source configuration's.
pub struct LaunchPoint {
    pub label: String,
    pub ratio: f64,
}

/// The launch configurations (`[tune]`): one row per measured
/// configuration, labelled by its constants, at its original's cost ratio
/// to the source configuration's (blue); the chosen one (`chosen`, an index
/// into `points`) in green, and the served variant's ratio on it (`served`:
/// the chosen ratio times its edits' cost ratio) as a red triangle, joined
/// to it: the launch's gain, then the edits' on top.
pub fn launch(
    points: &[LaunchPoint],
    chosen: Option<usize>,
    served: Option<f64>,
) -> Result<String, String> {
    let what = "launch configuration";
    let n = points.len();
    // A row per configuration, the first at the top.
    let y = |i: usize| (n - 1 - i) as f64;
    let height = (110 + 30 * n as u32).clamp(260, 4000);
    // Room for the longest label, about 6 pixels a character.
    let label_area = points.iter().map(|p| p.label.len()).max().unwrap_or(0) as u32 * 6 + 24;
    svg_sized(what, (SIZE.0, height), |root| {
        let values = points.iter().map(|p| p.ratio).chain(served).chain([1.0]);
        let (lo, hi) = range(values, Some(0.0));
        // The right part left empty for the legend.
        let hi = hi + (hi - lo) * 0.6;
        // Labels at whole rows only (plotters may put ticks between them).
        let labels = |v: &f64| {
            let k = v.round();
            if (v - k).abs() > 1e-9 || k < 0.0 || k >= n as f64 {
                return String::new();
            }
            points[n - 1 - k as usize].label.clone()
        };
        let mut chart = ChartBuilder::on(root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_area.min(SIZE.0 / 2))
            .build_cartesian_2d(lo..hi, -0.6f64..n as f64 - 0.4)
            .map_err(|e| failed(what, e))?;
        chart
            .configure_mesh()
            .x_desc("cost ratio (configuration's original / the source configuration's)")
            .y_labels(n + 1)
            .y_label_formatter(&labels)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| failed(what, e))?;
        chart
            .draw_series(LineSeries::new(
                [(1.0, -0.6), (1.0, n as f64 - 0.4)],
                OTHERS.stroke_width(1),
            ))
            .map_err(|e| failed(what, e))?
            .label("the source's configuration")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], OTHERS));
        chart
            .draw_series(
                points
                    .iter()
                    .enumerate()
                    .map(|(i, p)| Circle::new((p.ratio, y(i)), 5, TRAIN.filled())),
            )
            .map_err(|e| failed(what, e))?
            .label("configuration's original")
            .legend(|(x, y)| Circle::new((x + 8, y), 5, TRAIN.filled()));
        let Some((at, p)) = chosen.and_then(|i| Some((i, points.get(i)?))) else {
            return legend(&mut chart, what);
        };
        if let Some(served) = served {
            chart
                .draw_series(LineSeries::new(
                    [(p.ratio, y(at)), (served, y(at))],
                    FRONT.stroke_width(1),
                ))
                .map_err(|e| failed(what, e))?;
        }
        chart
            .draw_series([Circle::new((p.ratio, y(at)), 7, VALIDATED.filled())])
            .map_err(|e| failed(what, e))?
            .label("chosen: the search ran on it")
            .legend(|(x, y)| Circle::new((x + 8, y), 7, VALIDATED.filled()));
        if let Some(served) = served {
            chart
                .draw_series([TriangleMarker::new((served, y(at)), 8, FRONT.filled())])
                .map_err(|e| failed(what, e))?
                .label("served variant: the chosen with its edits")
                .legend(|(x, y)| TriangleMarker::new((x + 8, y), 8, FRONT.filled()));
        }
        legend(&mut chart, what)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(generation: u64, train: f64, validated: Option<f64>) -> GenerationPoint {
        GenerationPoint {
            generation,
            best_train: Some(train),
            best_validated: validated,
            evaluations: 16,
            seconds: Some(0.5),
        }
    }

    #[test]
    fn plots_are_svg_with_their_axes_named() {
        let points = [
            point(0, 0.98, None),
            point(1, 0.95, Some(0.96)),
            point(2, 0.91, Some(0.92)),
        ];
        let svg = cost(&points).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("generation") && svg.contains("best validated"));
        let svg = pareto(&[(0.9, 0.0), (0.8, 1e-6)], &[(0.95, 0.0)]).unwrap();
        assert!(svg.contains("<circle") && svg.contains("Pareto front"));
        let svg = rate(&points).unwrap().expect("timed");
        assert!(svg.contains("evaluations / s"));
        let untimed = [GenerationPoint {
            seconds: None,
            ..point(0, 1.0, None)
        }];
        assert_eq!(rate(&untimed).unwrap(), None);
    }

    /// A row per measured configuration, labelled by its constants; the
    /// chosen one marked, the served variant a triangle only when there is
    /// one.
    #[test]
    fn the_launch_plot_has_a_row_per_configuration() {
        let points: Vec<LaunchPoint> = [("B=32", 1.0), ("B=64", 0.8), ("B=256", 1.3)]
            .into_iter()
            .map(|(label, ratio)| LaunchPoint {
                label: label.into(),
                ratio,
            })
            .collect();
        let svg = launch(&points, Some(1), Some(0.6)).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        for label in ["B=32", "B=64", "B=256", "served variant"] {
            assert!(svg.contains(&format!("\n{label}")), "{label}: {svg}");
        }
        // Three configurations and the chosen one, and two legend markers;
        // the served variant and its legend marker.
        assert_eq!(svg.matches("<circle").count(), 6, "{svg}");
        assert_eq!(svg.matches("<polygon").count(), 2, "{svg}");
        let svg = launch(&points, Some(1), None).unwrap();
        assert_eq!(svg.matches("<polygon").count(), 0, "{svg}");
        assert!(!svg.contains("served variant"));
    }

    #[test]
    fn the_contributions_plot_draws_passing_subsets_only() {
        use gevo_model::stats::Interval;
        use gevo_search::contrib::{Class, Contributions, EditContribution, Outcome};
        let edit = |index, alone: Outcome, without: Outcome| EditContribution {
            index,
            edit: format!("delete {index}"),
            kernel: "k".into(),
            class: Class::Neutral,
            why: String::new(),
            alone,
            without,
            enables: Vec::new(),
            relies_on: Vec::new(),
        };
        let pass = |x, lo, hi| Outcome::Passes {
            cost: Interval {
                estimate: x,
                lo,
                hi,
            },
        };
        let fails = Outcome::Fails {
            reason: "mismatch".into(),
        };
        let c = Contributions {
            scope: gevo_search::evolve::Scope {
                backend: "cuda".into(),
                target: "H200".into(),
            },
            set: "heldout".into(),
            threshold: 0.01,
            patch: gevo_ir::Patch::new("00", "k"),
            full: Interval::point(0.5),
            edits: vec![
                edit(0, fails.clone(), pass(0.98, 0.97, 0.99)),
                edit(1, pass(1.0, 0.99, 1.01), fails),
            ],
            pairs: Vec::new(),
            variants_measured: 5,
            not_replayed: 0,
            seconds: 1.0,
            relies_cost: None,
        };
        let svg = contributions(&c).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("patch without the edit"));
        // One point per passing subset (two), and the two legend markers.
        assert_eq!(svg.matches("<circle").count(), 4, "{svg}");
        assert!(svg.contains("#1") && svg.contains("#2"), "{svg}");
    }
}
