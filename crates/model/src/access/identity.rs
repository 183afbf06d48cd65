//! A user as the kernel judges them when they open a path, emulated for a
//! uid the daemon is not running as: their groups (primary and
//! supplementary, from the user database: `getpwuid_r` and
//! `getgrouplist`), and for each file and directory on the way its mode
//! bits and POSIX ACL, as the kernel's `generic_permission` reads them.
//! Root may read and search anything.

use std::ffi::CString;
use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Read permission (`r`).
pub const READ: u32 = 4;
/// Search permission on a directory (`x`).
pub const SEARCH: u32 = 1;

/// A uid and the groups the system's user database gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    /// Primary and supplementary; empty for a uid the database lacks.
    pub groups: Vec<u32>,
}

/// What a user may not do on the way to a path. Messages name only
/// directories of the path as it was given, never where a symlink led.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// No search permission on this directory of the path as named.
    Search(PathBuf),
    /// No search permission on a directory of the path it resolves to.
    SearchResolved,
    /// No read permission on the file or directory itself.
    Read,
}

impl Denial {
    /// `who may not ...`, for a message after `refused: `.
    pub fn describe(&self, who: &str) -> String {
        match self {
            Denial::Search(dir) => {
                format!("{who} may not search its directory {}", dir.display())
            }
            Denial::SearchResolved => {
                format!("{who} may not search a directory of the path it resolves to")
            }
            Denial::Read => format!("{who} may not read it"),
        }
    }
}

impl Identity {
    /// `uid` with its groups from the user database.
    pub fn of(uid: u32) -> Identity {
        Identity {
            uid,
            groups: groups_of(uid),
        }
    }

    /// Whether `want` (bits of [`READ`], [`SEARCH`]) is granted on the
    /// file with `meta`, whose ACL is read at `path` (a `/proc/self/fd/N`
    /// for an open file).
    pub fn may(&self, path: &Path, meta: &Metadata, want: u32) -> bool {
        if self.uid == 0 {
            return true;
        }
        let mode = meta.mode();
        if meta.uid() == self.uid {
            return (mode >> 6) & want == want;
        }
        // The kernel looks at an ACL only when the group bits (its mask)
        // grant something.
        if mode & 0o070 != 0 {
            if let Some(acl) = acl_of(path) {
                return acl_permits(&acl, meta.gid(), self, want);
            }
        }
        let bits = if self.groups.contains(&meta.gid()) {
            mode >> 3
        } else {
            mode
        };
        bits & want == want
    }

    /// Before opening `path`: the first directory above it, as named (made
    /// absolute, not resolved), they may not search, top down. A directory
    /// that does not exist ends the walk: opening the path says so, which
    /// they could have found out themselves.
    pub fn may_reach(&self, path: &Path) -> Result<(), Denial> {
        if self.uid == 0 {
            return Ok(());
        }
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let mut dirs: Vec<&Path> = path.ancestors().skip(1).collect();
        dirs.reverse();
        for dir in dirs {
            let Ok(meta) = std::fs::metadata(dir) else {
                return Ok(());
            };
            if meta.is_dir() && !self.may(dir, &meta, SEARCH) {
                return Err(Denial::Search(dir.to_path_buf()));
            }
        }
        Ok(())
    }

    /// After opening: whether they may search every directory above
    /// `resolved` (the path the kernel opened, symlinks resolved) and have
    /// `want` on the file itself (`meta`, its ACL read at `acl_path`).
    pub fn may_open(
        &self,
        resolved: &Path,
        meta: &Metadata,
        acl_path: &Path,
        want: u32,
    ) -> Result<(), Denial> {
        if self.uid == 0 {
            return Ok(());
        }
        for dir in resolved.ancestors().skip(1) {
            let searchable =
                std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && self.may(dir, &m, SEARCH));
            if !searchable {
                return Err(Denial::SearchResolved);
            }
        }
        if !self.may(acl_path, meta, want) {
            return Err(Denial::Read);
        }
        Ok(())
    }

    /// Whether they may list and search the directory `dir`: search on
    /// every directory above it (as named and as resolved), read and search
    /// on it. `Ok` for a path that is not a directory they could see.
    pub fn may_list(&self, dir: &Path) -> Result<(), Denial> {
        self.may_reach(dir)?;
        let (Ok(resolved), Ok(meta)) = (std::fs::canonicalize(dir), std::fs::metadata(dir)) else {
            return Ok(());
        };
        self.may_open(&resolved, &meta, &resolved, READ | SEARCH)
    }
}

/// The primary and supplementary groups of `uid` in the user database.
fn groups_of(uid: u32) -> Vec<u32> {
    let mut buffer = vec![0 as libc::c_char; 4096];
    // SAFETY: a plain C struct of pointers and integers; all-zero is valid.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    loop {
        // SAFETY: the buffer and the out-pointers live across the call, and
        // its length is the buffer's.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buffer.len() < 1 << 20 {
            buffer.resize(buffer.len() * 2, 0);
            continue;
        }
        break;
    }
    if result.is_null() {
        return Vec::new();
    }
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut count = groups.len() as libc::c_int;
        // SAFETY: pw_name points into `buffer`, alive and NUL-terminated;
        // `groups` holds `count` entries.
        let rc = unsafe {
            libc::getgrouplist(entry.pw_name, entry.pw_gid, groups.as_mut_ptr(), &mut count)
        };
        if rc >= 0 {
            groups.truncate(count.max(0) as usize);
            return groups;
        }
        if groups.len() >= 1 << 16 {
            // Beyond any real system: the primary group only.
            return vec![entry.pw_gid];
        }
        let wanted = (count.max(0) as usize).max(groups.len() * 2);
        groups.resize(wanted, 0);
    }
}

/// The POSIX access ACL at `path` (the `system.posix_acl_access`
/// attribute), when it has one.
fn acl_of(path: &Path) -> Option<Vec<u8>> {
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    let name = c"system.posix_acl_access";
    for _ in 0..3 {
        // SAFETY: valid NUL-terminated strings; size 0 only asks the size.
        let size = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
        if size <= 0 {
            return None;
        }
        let mut value = vec![0u8; size as usize];
        // SAFETY: `value` holds `value.len()` bytes.
        let got = unsafe {
            libc::getxattr(
                path.as_ptr(),
                name.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        if got >= 0 {
            value.truncate(got as usize);
            return Some(value);
        }
        // ERANGE: it grew between the two calls; ask again.
    }
    None
}

/// The kernel's `posix_acl_permission` for a user who does not own the
/// file (the owner's entry is the mode's owner bits). The attribute: a
/// version (2), then entries of tag (u16), permissions (u16) and id (u32),
/// little-endian, sorted by tag. A malformed one grants nothing.
fn acl_permits(acl: &[u8], file_group: u32, who: &Identity, want: u32) -> bool {
    const USER: u16 = 0x02;
    const GROUP_OBJ: u16 = 0x04;
    const GROUP: u16 = 0x08;
    const MASK: u16 = 0x10;
    const OTHER: u16 = 0x20;
    if acl.len() < 4 || acl[..4] != 2u32.to_le_bytes() || (acl.len() - 4) % 8 != 0 {
        return false;
    }
    let entries: Vec<(u16, u32, u32)> = acl[4..]
        .chunks_exact(8)
        .map(|e| {
            (
                u16::from_le_bytes([e[0], e[1]]),
                u32::from(u16::from_le_bytes([e[2], e[3]])),
                u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            )
        })
        .collect();
    let mask = entries.iter().find(|e| e.0 == MASK).map_or(7, |e| e.1);
    let mut in_a_group = false;
    for &(tag, perm, id) in &entries {
        match tag {
            USER if id == who.uid => return perm & mask & want == want,
            GROUP_OBJ | GROUP => {
                let gid = if tag == GROUP_OBJ { file_group } else { id };
                if who.groups.contains(&gid) {
                    in_a_group = true;
                    if perm & want == want {
                        return mask & want == want;
                    }
                }
            }
            OTHER => return !in_a_group && perm & want == want,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut out = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in entries {
            out.extend(tag.to_le_bytes());
            out.extend(perm.to_le_bytes());
            out.extend(id.to_le_bytes());
        }
        out
    }

    #[test]
    fn acls_are_read_as_the_kernel_reads_them() {
        let ann = Identity {
            uid: 1001,
            groups: vec![100, 200],
        };
        // user::rw- user:1001:--- group::r-- mask::r-- other::r--
        let denied = acl(&[
            (1, 6, 0),
            (2, 0, 1001),
            (4, 4, 0),
            (0x10, 4, 0),
            (0x20, 4, 0),
        ]);
        assert!(!acl_permits(&denied, 300, &ann, READ));
        // A named group entry grants, within the mask.
        let group = acl(&[
            (1, 6, 0),
            (4, 0, 0),
            (8, 4, 200),
            (0x10, 5, 0),
            (0x20, 0, 0),
        ]);
        assert!(acl_permits(&group, 300, &ann, READ));
        assert!(!acl_permits(&group, 300, &ann, READ | 2));
        // In a matching group that grants nothing: not `other`'s bits.
        let member = acl(&[(1, 6, 0), (4, 0, 0), (0x10, 7, 0), (0x20, 4, 0)]);
        assert!(!acl_permits(&member, 100, &ann, READ));
        assert!(acl_permits(&member, 300, &ann, READ));
        assert!(!acl_permits(&[1, 0, 0, 0], 300, &ann, READ));
    }

    #[test]
    fn mode_bits_decide_by_owner_group_and_other() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let meta = |m: u32| {
            std::fs::set_permissions(&file, PermissionsExt::from_mode(m)).unwrap();
            std::fs::metadata(&file).unwrap()
        };
        let m = meta(0o640);
        let owner = Identity {
            uid: m.uid(),
            groups: vec![],
        };
        let member = Identity {
            uid: m.uid() + 1,
            groups: vec![m.gid()],
        };
        let stranger = Identity {
            uid: m.uid() + 2,
            groups: vec![m.gid() + 1],
        };
        let root = Identity {
            uid: 0,
            groups: vec![],
        };
        if m.uid() != 0 {
            assert!(owner.may(&file, &m, READ));
        }
        assert!(member.may(&file, &m, READ) && !stranger.may(&file, &m, READ));
        assert!(root.may(&file, &meta(0o000), READ));
        // The owner's bits count for the owner, even when others have more.
        let m = meta(0o044);
        if m.uid() != 0 {
            assert!(!owner.may(&file, &m, READ));
        }
        assert!(stranger.may(&file, &m, READ));
        // A directory above the file that they may not search.
        if stranger.may_reach(dir.path()).is_err() {
            println!("skipped the rest: the temporary directory's parents are private");
            return;
        }
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o700)).unwrap();
        let denial = stranger.may_reach(&file).unwrap_err();
        assert_eq!(denial, Denial::Search(dir.path().to_path_buf()));
        assert!(stranger.may_list(dir.path()).is_err());
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o711)).unwrap();
        assert_eq!(stranger.may_reach(&file), Ok(()));
        assert_eq!(stranger.may_list(dir.path()), Err(Denial::Read));
        // A uid the user database lacks has no groups.
        assert!(Identity::of(3_999_999_999).groups.is_empty());
        assert!(Identity::of(0).groups.contains(&0));
    }
}
