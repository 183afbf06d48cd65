# Sourced by the GPU scripts (run from the repository root).
# fixture_spec NAME: the team's fixture spec of that name, a kernel's
# (tests/fixtures/kernels) or else a pipeline's (tests/fixtures/pipelines).
fixture_spec() {
    local spec=tests/fixtures/kernels/$1.gevo.toml
    [ -f "$spec" ] || spec=tests/fixtures/pipelines/$1.gevo.toml
    echo "$spec"
}
