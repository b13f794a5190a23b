//! The heat2d solver itself, shared by the example programs: the block
//! decomposition, the halo exchange over frame's `Comm`, the Jacobi step and
//! the checksum of the whole grid.

use anyhow::bail;
use frame::comm::{Comm, CommExt};
use zerocopy::IntoBytes;

/// The grid and the length of the run.
#[derive(clap::Args, Clone, Debug)]
pub struct Size {
    /// Grid rows.
    #[arg(long, default_value_t = 512)]
    pub nx: usize,
    /// Grid columns.
    #[arg(long, default_value_t = 512)]
    pub ny: usize,
    /// Jacobi steps.
    #[arg(long, default_value_t = 2000)]
    pub steps: u64,
}

/// Message tags of the halo exchange, named by the direction of travel.
const TO_NORTH: u32 = 1;
const TO_SOUTH: u32 = 2;
const TO_WEST: u32 = 3;
const TO_EAST: u32 = 4;

/// Fixed temperatures on the four edges of the plate.
const TOP: f64 = 100.0;
const BOTTOM: f64 = 0.0;
const LEFT: f64 = 75.0;
const RIGHT: f64 = 50.0;

/// A rank's block of the grid and its neighbours.
#[derive(Clone, Copy, Debug)]
pub struct Block {
    /// First global row and column of the block's interior.
    row0: usize,
    col0: usize,
    /// Interior size.
    rows: usize,
    cols: usize,
    north: Option<usize>,
    south: Option<usize>,
    west: Option<usize>,
    east: Option<usize>,
}

/// Splits `n` into `parts` nearly equal ranges; returns (start, len) of `i`.
pub fn split(n: usize, parts: usize, i: usize) -> (usize, usize) {
    let base = n / parts;
    let extra = n % parts;
    (i * base + i.min(extra), base + usize::from(i < extra))
}

impl Block {
    pub fn new(nx: usize, ny: usize, rank: usize, size: usize) -> Self {
        // The most square process grid: pr rows of pc columns.
        let pr = (1..=size)
            .filter(|p| size % p == 0 && p * p <= size)
            .max()
            .unwrap_or(1);
        let pc = size / pr;
        let (r, c) = (rank / pc, rank % pc);
        let (row0, rows) = split(nx, pr, r);
        let (col0, cols) = split(ny, pc, c);
        Block {
            row0,
            col0,
            rows,
            cols,
            north: (r > 0).then(|| rank - pc),
            south: (r + 1 < pr).then(|| rank + pc),
            west: (c > 0).then(|| rank - 1),
            east: (c + 1 < pc).then(|| rank + 1),
        }
    }

    /// Interior rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Interior columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Cells per row of the grid, halo included.
    pub fn width(&self) -> usize {
        self.cols() + 2
    }

    fn len(&self) -> usize {
        (self.rows() + 2) * self.width()
    }

    /// A grid with the plate's fixed edge temperatures in the halo cells that
    /// lie on the plate's boundary, zero elsewhere.
    pub fn initial(&self) -> Vec<f64> {
        let w = self.width();
        let mut u = vec![0.0; self.len()];
        for j in 0..w {
            if self.north.is_none() {
                u[j] = TOP;
            }
            if self.south.is_none() {
                u[(self.rows + 1) * w + j] = BOTTOM;
            }
        }
        for i in 1..=self.rows {
            if self.west.is_none() {
                u[i * w] = LEFT;
            }
            if self.east.is_none() {
                u[i * w + self.cols + 1] = RIGHT;
            }
        }
        u
    }

    fn column(&self, u: &[f64], j: usize) -> Vec<f64> {
        (1..=self.rows).map(|i| u[i * self.width() + j]).collect()
    }

    /// The ranks whose halo cells this block reads each step.
    #[allow(dead_code)] // heat2d_mpi has no cone recovery
    pub fn neighbours(&self) -> Vec<usize> {
        [self.north, self.south, self.west, self.east]
            .into_iter()
            .flatten()
            .collect()
    }

    /// Exchanges halo rows and columns with the neighbours. Rows travel
    /// straight from and into the grid; columns go through a buffer.
    pub fn exchange(&self, comm: &dyn Comm, u: &mut [f64]) -> anyhow::Result<()> {
        self.exchange_with(comm, u, 0, &|_| true, &|_| true)
    }

    /// The halo exchange with the neighbours `send` and `receive` name,
    /// its tags `tags` above the live exchange's (a recovery's traffic
    /// kept apart from it).
    pub fn exchange_with(
        &self,
        comm: &dyn Comm,
        u: &mut [f64],
        tags: u32,
        send: &dyn Fn(usize) -> bool,
        receive: &dyn Fn(usize) -> bool,
    ) -> anyhow::Result<()> {
        let (w, cols) = (self.width(), self.cols);
        let first = w + 1..w + 1 + cols;
        let last = self.rows * w + 1..self.rows * w + 1 + cols;
        let to = |n: Option<usize>| n.filter(|r| send(*r));
        let from = |n: Option<usize>| n.filter(|r| receive(*r));
        if let Some(n) = to(self.north) {
            comm.send_slice(n, tags + TO_NORTH, &u[first])?;
        }
        if let Some(s) = to(self.south) {
            comm.send_slice(s, tags + TO_SOUTH, &u[last])?;
        }
        if let Some(west) = to(self.west) {
            comm.send_slice(west, tags + TO_WEST, &self.column(u, 1))?;
        }
        if let Some(east) = to(self.east) {
            comm.send_slice(east, tags + TO_EAST, &self.column(u, cols))?;
        }
        if let Some(n) = from(self.north) {
            comm.recv_into(n, tags + TO_SOUTH, &mut u[1..1 + cols])?;
        }
        if let Some(s) = from(self.south) {
            let halo = (self.rows + 1) * w + 1;
            comm.recv_into(s, tags + TO_NORTH, &mut u[halo..halo + cols])?;
        }
        let mut column = vec![0.0f64; self.rows];
        if let Some(west) = from(self.west) {
            comm.recv_into(west, tags + TO_EAST, &mut column)?;
            for (i, v) in column.iter().enumerate() {
                u[(i + 1) * w] = *v;
            }
        }
        if let Some(east) = from(self.east) {
            comm.recv_into(east, tags + TO_WEST, &mut column)?;
            for (i, v) in column.iter().enumerate() {
                u[(i + 1) * w + cols + 1] = *v;
            }
        }
        Ok(())
    }

    /// One Jacobi step from `u` into `next` (interior cells only).
    pub fn step(&self, u: &[f64], next: &mut [f64]) {
        jacobi(u, next, self.rows, self.cols);
    }

    fn interior(&self, u: &[f64]) -> Vec<f64> {
        let w = self.width();
        (1..=self.rows)
            .flat_map(|i| u[i * w + 1..i * w + 1 + self.cols].iter().copied())
            .collect()
    }
}

/// One Jacobi step from `u` into `next` over the interior of a grid of
/// `rows` x `cols` cells inside a ring of halo cells (the same arithmetic
/// in the same order wherever the grid is cut, so results are bit-exact).
pub fn jacobi(u: &[f64], next: &mut [f64], rows: usize, cols: usize) {
    jacobi_cells(u, next, cols + 2, 1..=rows, 1..=cols);
}

/// The Jacobi step of the cells in `rows` x `cols` of a grid `w` cells
/// wide (row and column 0 are halo cells).
pub fn jacobi_cells(
    u: &[f64],
    next: &mut [f64],
    w: usize,
    rows: std::ops::RangeInclusive<usize>,
    cols: std::ops::RangeInclusive<usize>,
) {
    for i in rows {
        for j in cols.clone() {
            let k = i * w + j;
            next[k] = 0.25 * (((u[k - w] + u[k + w]) + u[k - 1]) + u[k + 1]);
        }
    }
}

/// Decodes `n` f64 values sent by rank `src`.
fn f64s(bytes: &[u8], src: usize, n: usize) -> anyhow::Result<Vec<f64>> {
    let mut out = vec![0.0f64; n];
    if bytes.len() != out.as_bytes().len() {
        bail!("rank {src} sent {} bytes, expected {}", bytes.len(), n * 8);
    }
    out.as_mut_bytes().copy_from_slice(bytes);
    Ok(out)
}

/// Assembles the global grid on rank 0 and hashes it (row-major f64 bits).
pub fn checksum(
    comm: &dyn Comm,
    nx: usize,
    ny: usize,
    block: &Block,
    u: &[f64],
) -> anyhow::Result<Option<u64>> {
    let mine = block.interior(u);
    let Some(parts) = comm.gather(mine.as_bytes(), 0)? else {
        return Ok(None);
    };
    let mut global = vec![0.0f64; nx * ny];
    for (rank, bytes) in parts.iter().enumerate() {
        let b = Block::new(nx, ny, rank, comm.size());
        let values = f64s(bytes, rank, b.rows * b.cols)?;
        for i in 0..b.rows {
            let dst = (b.row0 + i) * ny + b.col0;
            global[dst..dst + b.cols].copy_from_slice(&values[i * b.cols..(i + 1) * b.cols]);
        }
    }
    Ok(Some(xxhash_rust::xxh3::xxh3_64(global.as_bytes())))
}
