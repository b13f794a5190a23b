//! heat2d's split of a recomputation (`frame run --recovery logged
//! --spares K`): a failed rank's replacement cuts its block into K strips
//! of rows, keeps the first and hands one to each helper frame started
//! for it, and the K processes step together until the replacement's next
//! checkpoint, when it gathers the strips back.
//!
//! Only the replacement talks to the other ranks, so the halo exchange
//! with them (fed from their logs) is the same as when it recomputes
//! alone. At every step it sends each helper the halo cells of its strip
//! that lie outside the block, the strips trade their edge rows among
//! themselves, all step their strips, and each helper sends back the edge
//! cells of its strip that the next exchange with the other ranks needs.
//! Each process steps the cells that need no new halo first, while those
//! messages travel, then the ring of cells that do. The replacement and
//! the first helper trade their edge rows inside those messages, so a
//! team of two sends one message each way per step. The arithmetic per
//! cell is the same wherever the block is cut, so the result is bit for
//! bit the one of a rank that never failed.

use crate::grid::{jacobi_cells, split, Block, Size};
use anyhow::bail;
use frame::comm::{Comm, CommExt};

/// Message tags in the team's communicator.
const START: u32 = 1;
const PART: u32 = 2;
const HALO: u32 = 3;
const UP: u32 = 4;
const DOWN: u32 = 5;
const EDGE: u32 = 6;

/// The rows of part `part` of a block of `n` rows cut into `parts`
/// strips: (first row, rows). The replacement's strip is a tenth smaller
/// than an even share, as it also exchanges with the other ranks and
/// feeds the helpers; the helpers share the rest evenly.
fn strip_rows(n: usize, parts: usize, part: usize) -> (usize, usize) {
    if parts == 1 {
        return (0, n);
    }
    let own = (n * 9 / (10 * parts)).clamp(1, n - (parts - 1));
    match part {
        0 => (0, own),
        _ => {
            let (row0, rows) = split(n - own, parts - 1, part - 1);
            (own + row0, rows)
        }
    }
}

/// One process's strip: `rows` rows of the block from block row `row0`,
/// with a ring of halo cells.
struct Strip {
    row0: usize,
    rows: usize,
    cols: usize,
    u: Vec<f64>,
    next: Vec<f64>,
}

impl Strip {
    fn new(block: &Block, parts: usize, part: usize) -> Self {
        let (row0, rows) = strip_rows(block.rows(), parts, part);
        let len = (rows + 2) * (block.cols() + 2);
        Self {
            row0,
            rows,
            cols: block.cols(),
            u: vec![0.0; len],
            next: vec![0.0; len],
        }
    }

    fn w(&self) -> usize {
        self.cols + 2
    }

    /// Interior row `i` (0-based) of the strip.
    fn row(&self, i: usize) -> &[f64] {
        let at = (i + 1) * self.w() + 1;
        &self.u[at..at + self.cols]
    }

    /// The interior, row after row.
    fn interior(&self) -> Vec<f64> {
        (0..self.rows).flat_map(|i| self.row(i).to_vec()).collect()
    }

    fn set_interior(&mut self, cells: &[f64]) {
        let (w, cols) = (self.w(), self.cols);
        for (i, row) in cells.chunks(cols).take(self.rows).enumerate() {
            self.u[(i + 1) * w + 1..(i + 1) * w + 1 + cols].copy_from_slice(row);
        }
    }

    /// Its first and last interior columns, then (for the last strip) its
    /// last row: what the replacement's exchange with the other ranks
    /// needs from it.
    fn edge(&self, last: bool) -> Vec<f64> {
        let w = self.w();
        let mut out: Vec<f64> = (1..=self.rows).map(|i| self.u[i * w + 1]).collect();
        out.extend((1..=self.rows).map(|i| self.u[i * w + self.cols]));
        if last && self.rows > 0 {
            out.extend_from_slice(self.row(self.rows - 1));
        }
        out
    }

    /// Its west and east halo columns, then (for the last strip) its
    /// south halo row, with corners: the cells outside the block.
    fn set_halo(&mut self, cells: &[f64], last: bool) {
        let (w, rows) = (self.w(), self.rows);
        for i in 0..rows {
            self.u[(i + 1) * w] = cells[i];
            self.u[(i + 1) * w + self.cols + 1] = cells[rows + i];
        }
        if last {
            let south = (rows + 1) * w;
            self.u[south..south + w].copy_from_slice(&cells[2 * rows..2 * rows + w]);
        }
    }

    /// Sends its edge rows to the strips above and below (for the
    /// next step); parts 0 and 1 trade theirs in the halo and edge
    /// messages instead.
    fn send_rows(&self, team: &dyn Comm) -> anyhow::Result<()> {
        let (part, parts) = (team.rank(), team.size());
        if part > 1 {
            team.send_slice(part - 1, UP, self.row(0))?;
        }
        if part > 0 && part + 1 < parts {
            team.send_slice(part + 1, DOWN, self.row(self.rows - 1))?;
        }
        Ok(())
    }

    /// Its north halo row (cells 1 to `cols`).
    fn north_mut(&mut self) -> &mut [f64] {
        &mut self.u[1..1 + self.cols]
    }

    /// Its south halo row (cells 1 to `cols`).
    fn south_mut(&mut self) -> &mut [f64] {
        let at = (self.rows + 1) * self.w() + 1;
        &mut self.u[at..at + self.cols]
    }

    /// Steps the cells whose neighbours are all in the strip.
    fn step_inner(&mut self) {
        let (w, rows, cols) = (self.w(), self.rows, self.cols);
        if rows > 2 && cols > 2 {
            jacobi_cells(&self.u, &mut self.next, w, 2..=rows - 1, 2..=cols - 1);
        }
    }

    /// Takes the rows of the strips above and below, steps the ring of
    /// cells next to the halo (its other halo cells set already) and
    /// makes the step's result current.
    fn step_ring(&mut self, team: &dyn Comm) -> anyhow::Result<()> {
        let (part, parts, w, cols) = (team.rank(), team.size(), self.w(), self.cols);
        if part > 1 {
            team.recv_into(part - 1, DOWN, self.north_mut())?;
        }
        if part > 0 && part + 1 < parts {
            team.recv_into(part + 1, UP, self.south_mut())?;
        }
        let rows = self.rows;
        jacobi_cells(&self.u, &mut self.next, w, 1..=1, 1..=cols);
        if rows > 1 {
            jacobi_cells(&self.u, &mut self.next, w, rows..=rows, 1..=cols);
        }
        if rows > 2 {
            jacobi_cells(&self.u, &mut self.next, w, 2..=rows - 1, 1..=1);
            if cols > 1 {
                jacobi_cells(&self.u, &mut self.next, w, 2..=rows - 1, cols..=cols);
            }
        }
        std::mem::swap(&mut self.u, &mut self.next);
        Ok(())
    }
}

/// The replacement's side: the team stepping with it, and the steps left.
pub struct Sharing<'a> {
    team: &'a dyn Comm,
    own: Strip,
    left: u64,
    first: bool,
}

/// The cells part `part` of `parts` sends back after a step: its edge
/// columns, its last row if it is the last part, its first row if it is
/// part 1 (the replacement's south halo).
fn edge_len(rows: usize, cols: usize, part: usize, parts: usize) -> usize {
    2 * rows + if part + 1 == parts { cols } else { 0 } + if part == 1 { cols } else { 0 }
}

/// The cells part `part` of `parts` is sent before a step: its halo
/// columns, its south halo row (with corners) if it is the last part, the
/// replacement's last row if it is part 1 (its north halo).
fn halo_len(rows: usize, cols: usize, part: usize, parts: usize) -> usize {
    2 * rows + if part + 1 == parts { cols + 2 } else { 0 } + if part == 1 { cols } else { 0 }
}

impl<'a> Sharing<'a> {
    /// Starts sharing the next `steps` steps of `block` (whose grid `u` was
    /// just restored) with the helpers of `team`; `None` when there is
    /// nothing to share (each helper is told so and goes).
    pub fn start(
        team: &'a dyn Comm,
        block: &Block,
        u: &[f64],
        steps: u64,
    ) -> anyhow::Result<Option<Self>> {
        let parts = team.size();
        // Every strip needs a row.
        let steps = if block.rows() >= parts { steps } else { 0 };
        for part in 1..parts {
            team.send_slice(part, START, &[steps])?;
        }
        if steps == 0 {
            return Ok(None);
        }
        let (w, cols) = (block.width(), block.cols());
        let mut own = Strip::new(block, parts, 0);
        for part in 0..parts {
            let (row0, rows) = strip_rows(block.rows(), parts, part);
            let cells: Vec<f64> = (row0 + 1..=row0 + rows)
                .flat_map(|i| u[i * w + 1..i * w + 1 + cols].to_vec())
                .collect();
            match part {
                0 => own.set_interior(&cells),
                _ => team.send_slice(part, PART, &cells)?,
            }
            if part == 1 {
                // Part 1's first row is the replacement's south halo.
                own.south_mut().copy_from_slice(&cells[..cols]);
            }
        }
        Ok(Some(Self {
            team,
            own,
            left: steps,
            first: true,
        }))
    }

    /// One step of the whole block, its exchange with the other ranks
    /// over `world`. Returns whether the sharing is over: then `u` holds
    /// the whole block again.
    pub fn step(&mut self, world: &dyn Comm, block: &Block, u: &mut [f64]) -> anyhow::Result<bool> {
        let (team, parts, w, cols) = (self.team, self.team.size(), block.width(), block.cols());
        // What needs no new halo first, while the helpers' edges travel.
        self.own.step_inner();
        // The block's edge cells, from every strip.
        let put = |u: &mut [f64], row0: usize, rows: usize, edge: &[f64], last: bool| {
            for i in 0..rows {
                u[(row0 + 1 + i) * w + 1] = edge[i];
                u[(row0 + 1 + i) * w + cols] = edge[rows + i];
            }
            if last {
                let at = (row0 + rows) * w + 1;
                u[at..at + cols].copy_from_slice(&edge[2 * rows..2 * rows + cols]);
            }
        };
        put(u, 0, self.own.rows, &self.own.edge(parts == 1), parts == 1);
        let first = self.own.row(0).to_vec();
        u[w + 1..w + 1 + cols].copy_from_slice(&first);
        if !self.first {
            for part in 1..parts {
                let (row0, rows) = strip_rows(block.rows(), parts, part);
                let mut edge = vec![0.0f64; edge_len(rows, cols, part, parts)];
                team.recv_into(part, EDGE, &mut edge)?;
                put(u, row0, rows, &edge, part + 1 == parts);
                if part == 1 {
                    let n = edge.len();
                    self.own.south_mut().copy_from_slice(&edge[n - cols..]);
                }
            }
        }
        self.first = false;
        block.exchange(world, u)?;
        // Each strip's cells outside the block.
        let halo = |row0: usize, rows: usize, last: bool| -> Vec<f64> {
            let mut out: Vec<f64> = (row0 + 1..=row0 + rows).map(|i| u[i * w]).collect();
            out.extend((row0 + 1..=row0 + rows).map(|i| u[i * w + cols + 1]));
            if last {
                let south = (block.rows() + 1) * w;
                out.extend_from_slice(&u[south..south + w]);
            }
            out
        };
        for part in 1..parts {
            let (row0, rows) = strip_rows(block.rows(), parts, part);
            let mut cells = halo(row0, rows, part + 1 == parts);
            if part == 1 {
                cells.extend_from_slice(self.own.row(self.own.rows - 1));
            }
            team.send_slice(part, HALO, &cells)?;
        }
        let mine = halo(0, self.own.rows, parts == 1);
        self.own.set_halo(&mine, parts == 1);
        self.own.u[..w].copy_from_slice(&u[..w]);
        self.own.step_ring(team)?;
        self.left -= 1;
        if self.left > 0 {
            return Ok(false);
        }
        // The whole block again, before the checkpoint.
        for part in 0..parts {
            let (row0, rows) = strip_rows(block.rows(), parts, part);
            let cells = if part == 0 {
                self.own.interior()
            } else {
                let mut cells = vec![0.0f64; rows * cols];
                team.recv_into(part, PART, &mut cells)?;
                cells
            };
            for (i, row) in cells.chunks(cols).enumerate() {
                let at = (row0 + 1 + i) * w + 1;
                u[at..at + cols].copy_from_slice(row);
            }
        }
        Ok(true)
    }
}

/// A helper's side: its strip of the failed rank's block, stepped as the
/// replacement says, sent back at the end. Part 1 dies after `dies_after`
/// steps, if given (tests).
pub fn help(
    team: &frame_runtime::Team<'_>,
    size: &Size,
    dies_after: Option<u64>,
) -> anyhow::Result<()> {
    let comm = team.comm();
    let (part, parts) = (team.part(), team.parts());
    if part == 0 || part >= parts {
        bail!("heat2d: helper part {part} of {parts}");
    }
    let block = Block::new(size.nx, size.ny, team.rank(), team.world_size());
    let mut steps = [0u64];
    comm.recv_into(0, START, &mut steps)?;
    if steps[0] == 0 {
        return Ok(());
    }
    let mut strip = Strip::new(&block, parts, part);
    let cols = strip.cols;
    let mut cells = vec![0.0f64; strip.rows * cols];
    comm.recv_into(0, PART, &mut cells)?;
    strip.set_interior(&cells);
    strip.send_rows(comm)?;
    let last = part + 1 == parts;
    let mut halo = vec![0.0f64; halo_len(strip.rows, cols, part, parts)];
    let die = |done: u64| {
        if part == 1 && dies_after == Some(done) {
            crate::say(&format!(
                "heat2d: helper {part} of rank {} dying\n",
                team.rank()
            ));
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
    };
    die(0);
    for left in (0..steps[0]).rev() {
        // What needs no new halo first, while the halo travels.
        strip.step_inner();
        comm.recv_into(0, HALO, &mut halo)?;
        strip.set_halo(&halo, last);
        if part == 1 {
            let n = halo.len();
            strip.north_mut().copy_from_slice(&halo[n - cols..]);
        }
        strip.step_ring(comm)?;
        die(steps[0] - left);
        if left > 0 {
            let mut edge = strip.edge(last);
            if part == 1 {
                edge.extend_from_slice(strip.row(0));
            }
            comm.send_slice(0, EDGE, &edge)?;
            strip.send_rows(comm)?;
        }
    }
    comm.send_slice(0, PART, &strip.interior())?;
    let line = format!(
        "heat2d: helper {part} of rank {} stepped rows {}..{} {} times, used {:.3} s of CPU\n",
        team.rank(),
        strip.row0,
        strip.row0 + strip.rows,
        steps[0],
        frame_runtime::process_cpu_time().as_secs_f64()
    );
    crate::say(&line);
    Ok(())
}
