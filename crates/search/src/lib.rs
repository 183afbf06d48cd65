//! gevo's search: a variant evaluated on the simulator (`eval`), the GEVO
//! engine as a value (`evolve`), edit contributions (`contrib`), seeding a
//! new version from an earlier job (`seed`), checkpoints (`store`) and one
//! job driven a generation at a time (`drive`). See ARCHITECTURE.md,
//! "gevo-search".

pub mod contrib;
pub mod drive;
pub mod eval;
pub mod evolve;
pub mod seed;
pub mod store;
