// The command line as a vLLM (argparse) user expects it on top of CLI11: a repeated option
// takes its last value, vLLM's short aliases (-tp, -pp) work, and every parse error is one
// `error:` line naming the flag and the subcommand, with a "did you mean" for a misspelt flag.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace llmserve::cli {

/// Call on the root app before any subcommand or option is added (subcommands copy it): a
/// single-value option given twice takes the last value, as argparse does (CLI11's default is
/// an error).
void apply_argparse_conventions(CLI::App& app);

/// Call on the root app after every subcommand and option is added: an option of a number type
/// (INT, UINT, FLOAT, ...: every type but TEXT) given an empty value (`--temperature ""`,
/// `--top-k=`), a blank in it (`" 3"`) or a hex one (`0x10`) is a parse error naming the flag,
/// where CLI11 would read 0, 3 and 16.
void check_number_syntax(CLI::App& app);

/// Whether `value` is an optional sign and one or more decimal digits (nothing else).
bool is_decimal_integer(const std::string& value);

/// "'VALUE' is not a decimal number" when `value` holds a blank or is hex (0x..., which
/// strtod / strtol read as 16 for "0x10"), else empty: the check check_number_syntax applies,
/// for options parsed by hand.
std::string decimal_syntax_error(const std::string& value);

/// argv with vLLM's multi-letter short aliases, which CLI11 cannot declare, spelt long:
/// `-tp N`, `-tp=N` -> `--tensor-parallel-size N`; `-pp` -> `--pipeline-parallel-size`.
/// Everything after a bare `--` is left alone.
std::vector<std::string> expand_short_aliases(int argc, char** argv);

/// The one line (no "error: " prefix, no newline) for a parse error of `app`'s command line:
///  - an unknown flag of the subcommand that ran: "unknown flag --foo for 'llmserve serve';
///    did you mean --port? (see 'llmserve serve --help')" (the hint only when a flag is close);
///  - an unknown command: "unknown command 'srve' for 'llmserve'; did you mean serve? (...)";
///  - a stray positional argument: "unexpected argument 'x' for 'llmserve serve' (...)";
///  - anything else: CLI11's message on one line plus the help hint.
/// An unknown flag is reported before CLI11's own error (a missing required flag is often the
/// misspelt one).
std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& error);

}  // namespace llmserve::cli
