// The coda command's subcommands; each returns the process exit code.
#pragma once

namespace coda::cli {

int info(int argc, char** argv);
int demo(int argc, char** argv);
int bench(int argc, char** argv);

}  // namespace coda::cli
