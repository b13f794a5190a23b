//! Checkpoints written variable by variable (`FTI_InitICP`,
//! `FTI_AddVarICP`, `FTI_FinalizeICP`).
//!
//! Each variable is saved as it was when it was added: its bytes are copied
//! aside then, and the checkpoint written at `FTI_FinalizeICP` is made from
//! those copies, so the program may change a variable as soon as it has
//! added it. Every protected variable must be added.

use crate::args::{checked_level, var_id};
use crate::session::{self, Icp, Var};
use crate::status::{guard, Failure, FTI_SCES};
use std::collections::BTreeMap;
use std::os::raw::c_int;

/// Starts a checkpoint at `level` (see `FTI_Checkpoint`) written variable
/// by variable; with `activate` false, this and the next `FTI_AddVarICP`
/// and `FTI_FinalizeICP` calls do nothing.
#[no_mangle]
pub extern "C" fn FTI_InitICP(_id: c_int, level: c_int, activate: bool) -> c_int {
    guard("FTI_InitICP", || {
        let level = if activate {
            Some(checked_level(level)?)
        } else {
            None
        };
        session::with(|s| {
            if s.icp.is_some() {
                return Err(Failure::new(
                    "a checkpoint is already being written (FTI_FinalizeICP first)",
                ));
            }
            s.icp = Some(Icp {
                level,
                saved: BTreeMap::new(),
            });
            Ok(FTI_SCES)
        })
    })
}

/// Adds protected variable `var` to the checkpoint started by
/// `FTI_InitICP`, as it is now.
#[no_mangle]
pub extern "C" fn FTI_AddVarICP(var: c_int) -> c_int {
    guard("FTI_AddVarICP", || {
        let id = var_id(var)?;
        session::with(|s| {
            let var = s.vars.get(&id).copied();
            let icp = s
                .icp
                .as_mut()
                .ok_or_else(|| Failure::new("FTI_InitICP was not called"))?;
            if icp.level.is_none() {
                return Ok(FTI_SCES);
            }
            let var = var.ok_or_else(|| Failure::new(format!("variable {id} is not protected")))?;
            if icp.saved.contains_key(&id) {
                return Err(Failure::new(format!("variable {id} was already added")));
            }
            let bytes = var.bytes();
            let mut copy = vec![0u64; bytes.div_ceil(8)];
            // SAFETY: the variable's memory is valid for its size (the
            // program protected it), and `copy` holds at least that many
            // bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(var.ptr, copy.as_mut_ptr().cast::<u8>(), bytes)
            };
            icp.saved.insert(id, copy);
            Ok(FTI_SCES)
        })
    })
}

/// Writes the checkpoint started by `FTI_InitICP` from the variables
/// added. Collective.
#[no_mangle]
pub extern "C" fn FTI_FinalizeICP() -> c_int {
    guard("FTI_FinalizeICP", || {
        session::with(|s| {
            let icp = s
                .icp
                .take()
                .ok_or_else(|| Failure::new("FTI_InitICP was not called"))?;
            let Some(level) = icp.level else {
                return Ok(FTI_SCES);
            };
            let missing: Vec<String> = s
                .vars
                .keys()
                .filter(|id| !icp.saved.contains_key(id))
                .map(u32::to_string)
                .collect();
            if !missing.is_empty() {
                return Err(Failure::new(format!(
                    "protected variable(s) {} not added; the checkpoint was not written",
                    missing.join(", ")
                )));
            }
            let originals = s.vars.clone();
            let mut saved = icp.saved;
            for (id, var) in &originals {
                let copy = saved
                    .get_mut(id)
                    .map_or(std::ptr::null_mut(), |c| c.as_mut_ptr().cast());
                s.protect(*id, Var { ptr: copy, ..*var })?;
            }
            let written = s.ckpt.checkpoint_at(level);
            for (id, var) in originals {
                s.protect(id, var)?;
            }
            written?;
            s.keys.checkpointed();
            Ok(FTI_SCES)
        })
    })
}
