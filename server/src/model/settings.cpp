#include "model/settings.hpp"

#include <algorithm>

#include "kw/common/json_reader.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxUrlBytes = 2048;

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_control_or_space(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte <= 0x20 || byte == 0x7f;
}
bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// GitHub: an owner is 1-39 letters, digits or single hyphens, not at either end.
std::string github_owner_problem(std::string_view owner) {
  if (owner.empty() || owner.size() > 39) return "the owner must be 1 to 39 characters";
  if (owner.front() == '-' || owner.back() == '-') return "the owner cannot start or end with '-'";
  for (std::size_t i = 0; i < owner.size(); ++i) {
    if (owner[i] == '-' && i > 0 && owner[i - 1] == '-') return "the owner cannot hold \"--\"";
    if (!is_alnum(owner[i]) && owner[i] != '-') return "the owner may hold only letters, digits and '-'";
  }
  return {};
}

// GitLab: a path segment holds letters, digits, '_', '-' and '.', starts with
// neither '-' nor '.', and does not end in ".git" or ".atom".
std::string gitlab_segment_problem(std::string_view segment) {
  if (segment.empty()) return "a path segment is empty";
  if (segment.size() > 255) return "a path segment is over 255 characters";
  if (segment.front() == '-' || segment.front() == '.') return "a path segment cannot start with '-' or '.'";
  if (ends_with(segment, ".git") || ends_with(segment, ".atom"))
    return "a path segment cannot end in \".git\" or \".atom\"";
  for (char c : segment) {
    if (!is_alnum(c) && c != '_' && c != '-' && c != '.')
      return "a path segment may hold only letters, digits, '_', '-' and '.'";
  }
  return {};
}

}  // namespace

std::string name_problem(std::string_view text) {
  if (text.empty()) return "must not be empty";
  if (text.size() > common::kMaxNameBytes)
    return "at most " + std::to_string(common::kMaxNameBytes) + " bytes (got " + std::to_string(text.size()) +
           ")";
  if (std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
    return "must not hold control characters";
  return {};
}

std::string webhook_url_problem(std::string_view text) {
  if (text.size() > kMaxUrlBytes) return "at most " + std::to_string(kMaxUrlBytes) + " bytes";
  std::size_t host_start = 0;
  if (text.rfind("http://", 0) == 0) {
    host_start = 7;
  } else if (text.rfind("https://", 0) == 0) {
    host_start = 8;
  } else {
    return "the scheme must be http:// or https://";
  }
  if (std::any_of(text.begin(), text.end(), is_control_or_space))
    return "must not hold spaces or control characters (CR, LF, ...)";
  const std::size_t authority_end = std::min(text.find_first_of("/?#", host_start), text.size());
  std::string_view authority = text.substr(host_start, authority_end - host_start);
  if (authority.find('@') != std::string_view::npos) return "must not carry user information (user@host)";
  std::string_view host = authority, port;
  if (!authority.empty() && authority.front() == '[') {  // an IPv6 literal
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return "an IPv6 host must end with ']'";
    host = authority.substr(0, close + 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return "after an IPv6 host only \":port\" may follow";
      port = authority.substr(close + 2);
      if (port.empty()) return "the port is empty";
    }
  } else if (const std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) return "the port is empty";
  }
  if (host.empty()) return "the host is missing";
  if (host.front() != '[' && !std::all_of(host.begin(), host.end(), [](char c) {
        return is_alnum(c) || c == '-' || c == '.' || c == '_';
      }))
    return "the host may hold only letters, digits, '-', '_' and '.'";
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), is_digit) ||
      (!port.empty() && std::stoi(std::string(port)) > 65535))
    return "the port must be a number up to 65535";
  return {};
}

std::string github_repo_problem(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos || text.find('/', slash + 1) != std::string_view::npos)
    return "exactly one '/' between owner and name";
  if (std::string reason = github_owner_problem(text.substr(0, slash)); !reason.empty()) return reason;
  std::string_view name = text.substr(slash + 1);
  if (name.empty() || name.size() > 100) return "the name must be 1 to 100 characters";
  if (name == "." || name == "..") return "the name cannot be \".\" or \"..\"";
  for (char c : name) {
    if (!is_alnum(c) && c != '_' && c != '-' && c != '.')
      return "the name may hold only letters, digits, '_', '-' and '.'";
  }
  return {};
}

std::string gitlab_project_problem(std::string_view text) {
  if (text.empty()) return "must not be empty";
  if (text.size() > 255) return "at most 255 characters";
  if (std::all_of(text.begin(), text.end(), is_digit)) return {};  // the numeric project id
  std::size_t segments = 0, start = 0;
  while (start <= text.size()) {
    const std::size_t slash = std::min(text.find('/', start), text.size());
    if (std::string reason = gitlab_segment_problem(text.substr(start, slash - start)); !reason.empty())
      return reason;
    ++segments;
    start = slash + 1;
  }
  if (segments < 2) return "a path names its group: \"group/name\"";
  if (segments > 21) return "at most 20 nested groups";
  return {};
}

double ProjectSettings::min_threshold_for(const std::string& case_name) const {
  auto it = case_thresholds.find(case_name);
  return it == case_thresholds.end() ? min_threshold : it->second;
}

common::DetectionSettings ProjectSettings::detection() const {
  common::DetectionSettings settings;
  settings.run_alpha = run_alpha;
  settings.min_threshold = min_threshold;
  settings.energy_threshold = energy_threshold;
  return settings;
}

json ProjectSettings::to_json() const {
  auto or_null = [](const std::string& text) { return text.empty() ? json(nullptr) : json(text); };
  return {{"name", name},
          {"default_branch", default_branch},
          {"min_threshold", min_threshold},
          {"case_thresholds", case_thresholds},
          {"energy_threshold", energy_threshold},
          {"run_alpha", run_alpha},
          {"inconclusive_gate", inconclusive_gate},
          {"inconclusive_factor", inconclusive_factor},
          {"github_repo", or_null(github_repo)},
          {"webhook_url", or_null(webhook_url)},
          {"gitlab_project", or_null(gitlab_project)}};
}

void ProjectSettings::apply(const SettingsChange& change) {
  if (change.default_branch) default_branch = *change.default_branch;
  if (change.min_threshold) min_threshold = *change.min_threshold;
  if (change.energy_threshold) energy_threshold = *change.energy_threshold;
  if (change.run_alpha) run_alpha = *change.run_alpha;
  if (change.inconclusive_gate) inconclusive_gate = *change.inconclusive_gate;
  if (change.inconclusive_factor) inconclusive_factor = *change.inconclusive_factor;
  for (const auto& [case_name, threshold] : change.case_thresholds) {
    if (threshold) {
      case_thresholds[case_name] = *threshold;
    } else {
      case_thresholds.erase(case_name);
    }
  }
  if (change.github_repo) github_repo = change.github_repo->value_or("");
  if (change.webhook_url) webhook_url = change.webhook_url->value_or("");
  if (change.gitlab_project) gitlab_project = change.gitlab_project->value_or("");
}

}  // namespace kw::server
