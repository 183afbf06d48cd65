//! Every integration test of gevod in one test binary: each binary links
//! LLVM statically, and some forty of them made a clean build slow and large
//! enough to fill CI's disk. One module per file, as before; run one file's
//! tests with `cargo test -p gevod --test integration <file>::`.

mod common;

mod architecture;
mod cli;
mod cmake_adoption;
mod cmake_choices;
mod cmake_example;
mod cmake_install;
mod cmake_names;
mod cmake_pipeline;
mod cmake_toolkit;
mod cuda_backend;
mod cuda_promotion;
mod daemon;
mod daemon_access;
mod daemon_adoption;
mod daemon_cpu;
mod daemon_explain;
mod daemon_generated;
mod daemon_hygiene;
mod daemon_shared;
mod daemon_socket;
mod daemon_transplant;
mod daemon_writable;
mod drive;
mod edit_fixtures;
mod evolve;
mod evolve_cli;
mod evolve_pipelines;
mod evolve_quality;
mod evolve_search;
mod explain_edits;
mod findings;
mod generated;
mod guard_barriers;
mod guard_builds;
mod harness;
mod harness_exec;
mod hostile_ir;
mod outputs;
mod pipelines_ir;
mod random_patches;
mod relies_on;
mod report_browser;
mod rights;
mod safety_gate;
mod sim_fixtures;
mod sim_intrinsics;
mod sim_mutants;
mod sim_nvvm;
mod sim_pipelines;
mod sim_smoke;
mod sim_vectors;
mod sizes;
mod slurm;
mod source_lines;
mod spec;
mod spec_init;
mod spec_kernel;
mod special_files;
mod transplant;
mod trust;
mod worker_pool;
