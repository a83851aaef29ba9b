#include "cli/parse_errors.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "common/edit_distance.h"

namespace llmserve::cli {
namespace {

/// "llmserve bench serve" for the `serve` subcommand of `bench`.
std::string command_path(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* a = app; a->get_parent() != nullptr; a = a->get_parent())
    names.push_back(a->get_name());
  std::string path = "llmserve";
  for (auto it = names.rbegin(); it != names.rend(); ++it) path += " " + *it;
  return path;
}

/// The innermost subcommand that started parsing (the root when none did).
const CLI::App* active_command(const CLI::App& root) {
  const CLI::App* cur = &root;
  for (;;) {
    const std::vector<CLI::App*> subs = cur->get_subcommands();
    if (subs.empty()) return cur;
    cur = subs.back();
  }
}

/// A leftover argument that looks like a flag (not a negative number).
bool is_flag(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1])) &&
         arg[1] != '.';
}

/// The closest of `candidates` to `word`, or "" when none is close enough to be a typo: at
/// most max(2, |word| / 3) edits.
std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : o->get_snames()) names.push_back("-" + n);
  }
  return names;
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::string with_suggestion(std::string line, const std::string& suggestion) {
  if (!suggestion.empty()) line += fmt::format("; did you mean {}?", suggestion);
  return line;
}

/// "an integer" for CLI11's INT, ... (how a value of the option's type is described).
std::string type_phrase(const std::string& type_name) {
  if (type_name.rfind("UINT", 0) == 0) return "a non-negative integer";
  if (type_name.rfind("INT", 0) == 0) return "an integer";
  if (type_name.rfind("FLOAT", 0) == 0) return "a number";
  return "a valid value (" + type_name + ")";
}

/// CLI11's message, reworded where CLI11's own is unclear, on one line and naming the flag:
/// "Could not convert: --port = abc" -> "--port: 'abc' is not an integer";
/// "--port: 1 required INT missing" -> "--port needs a value".
std::string plain_message(const CLI::App& cmd, const CLI::ParseError& error) {
  std::string message = error.what();
  std::replace(message.begin(), message.end(), '\n', ' ');
  const std::string convert = "Could not convert: ";
  if (error.get_name() == "ConversionError" && message.rfind(convert, 0) == 0) {
    const size_t eq = message.find(" = ");
    if (eq != std::string::npos) {
      const std::string name = message.substr(convert.size(), eq - convert.size());
      const std::string value = message.substr(eq + 3);
      const CLI::Option* opt = cmd.get_option_no_throw(name);
      // A flag (--x, --x=VALUE) has no type name: the spellings CLI11 reads as a boolean.
      if (opt != nullptr && opt->get_expected_max() == 0)
        return fmt::format("{}: '{}' is not a boolean (true/false, yes/no, on/off, 1/0)", name,
                           value);
      // The syntax was checked (check_number_syntax): digits CLI11 cannot convert are out of
      // the option's range, not "not an integer".
      if (is_decimal_integer(value)) return fmt::format("{}: '{}' is out of range", name, value);
      return fmt::format("{}: '{}' is not {}", name, value,
                         type_phrase(opt != nullptr ? opt->get_type_name() : "TEXT"));
    }
  }
  if (error.get_name() == "ArgumentMismatch" && message.find(" required ") != std::string::npos &&
      message.size() > 8 && message.compare(message.size() - 8, 8, " missing") == 0)
    return message.substr(0, message.find(':')) + " needs a value";
  return message;
}

}  // namespace

bool is_decimal_integer(const std::string& value) {
  const size_t sign = !value.empty() && (value[0] == '-' || value[0] == '+') ? 1 : 0;
  return value.size() > sign &&
         std::all_of(value.begin() + static_cast<std::ptrdiff_t>(sign), value.end(),
                     [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
}

std::string decimal_syntax_error(const std::string& value) {
  // strtod / strtol (CLI11's conversions, std::stod) skip leading blanks and read hex: " 3"
  // and "0x10" would become 3 and 16 where a typo was meant.
  const size_t sign = !value.empty() && (value[0] == '-' || value[0] == '+') ? 1 : 0;
  if (std::any_of(value.begin(), value.end(),
                  [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); }) ||
      (value.size() > sign + 1 && value[sign] == '0' &&
       (value[sign + 1] == 'x' || value[sign + 1] == 'X')))
    return fmt::format("'{}' is not a decimal number", value);
  return std::string();
}

void apply_argparse_conventions(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

void check_number_syntax(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size() == 0 || opt->get_type_name().rfind("TEXT", 0) == 0) continue;
    // A plain integer option (no human_int transform: its type name would say "INT:INT (4k
    // ...)") is checked here value by value: CLI11 converts only the value TakeLast keeps, so
    // `--port abc --port 8000` passed, and its conversion error joins the values ("'1,2'").
    const std::string type = opt->get_type_name();
    const bool plain_integer = type == "INT" || type == "UINT";
    opt->check(CLI::Validator(
        [plain_integer, type](std::string& value) -> std::string {
          if (value.empty()) return "needs a number, got an empty value";
          if (plain_integer && !is_decimal_integer(value))
            return fmt::format("'{}' is not {}", value, type_phrase(type));
          return decimal_syntax_error(value);
        },
        "", "decimal"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_number_syntax(*sub);
}

std::vector<std::string> expand_short_aliases(int argc, char** argv) {
  static constexpr std::pair<const char*, const char*> kAliases[] = {
      {"-tp", "--tensor-parallel-size"}, {"-pp", "--pipeline-parallel-size"}};
  std::vector<std::string> out;
  bool options_ended = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (i > 0 && !options_ended) {
      options_ended = arg == "--";
      for (const auto& [alias, name] : kAliases) {
        const size_t n = std::strlen(alias);
        if (arg.compare(0, n, alias) == 0 && (arg.size() == n || arg[n] == '='))
          arg = name + arg.substr(n);
      }
    }
    out.push_back(std::move(arg));
  }
  return out;
}

std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& error) {
  const CLI::App* cmd = active_command(app);
  const std::string path = command_path(cmd);
  const std::string hint = fmt::format(" (see '{} --help')", path);
  for (const std::string& arg : cmd->remaining()) {
    if (is_flag(arg)) {
      const std::string name = arg.substr(0, arg.find('='));
      return with_suggestion(fmt::format("unknown flag {} for '{}'", name, path),
                             closest(name, flag_names(*cmd))) + hint;
    }
  }
  if (const std::vector<std::string> extra = cmd->remaining(); !extra.empty()) {
    if (cmd == &app)
      return with_suggestion(fmt::format("unknown command '{}'", extra[0]),
                             closest(extra[0], command_names(app))) + hint;
    return fmt::format("unexpected argument '{}' for '{}'", extra[0], path) + hint;
  }
  if (cmd == &app && error.get_name() == "RequiredError")
    return fmt::format("no command given (one of: {})", fmt::join(command_names(app), ", ")) +
           hint;
  return plain_message(*cmd, error) + hint;
}

}  // namespace llmserve::cli
