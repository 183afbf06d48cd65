//! The `gevo-client` command line.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "gevo-client",
    version,
    about = "Asks the gevo daemon for the best validated PTX of a kernel",
    long_about = "Asks the gevo daemon for the best validated PTX of a kernel.\n\n\
                  This build has no daemon commands yet; it reports its protocol version."
)]
struct Cli {
    /// Print the wire protocol version and exit.
    #[arg(long)]
    protocol_version: bool,
}

fn main() {
    let cli = Cli::parse();
    if cli.protocol_version {
        println!("{}", gevo_client::PROTOCOL_VERSION);
    }
}
