// Reading small request bodies and query parameters; every error names the
// field (422) or the parameter (400).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "http/http_types.hpp"
#include "kw/common/json_reader.hpp"
#include "model/runs.hpp"

namespace kw::server {

nlohmann::json require_object(const Request& request);

// A name by default (at most common::kMaxNameBytes); reasons and other text
// pass a larger bound.
std::string body_string(const nlohmann::json& body, const std::string& field, bool required = true,
                        std::size_t max_bytes = common::kMaxNameBytes);
std::optional<std::int64_t> body_integer(const nlohmann::json& body, const std::string& field,
                                         std::int64_t min, std::int64_t max);

// ?NAME=N, 1 <= N <= max; `fallback` when absent.
int int_param(const Request& request, const std::string& name, int fallback, int max);
// ?page=N&per_page=M (per_page at most 2000).
Page page_params(const Request& request, int default_per_page);

// ?gpu=MODEL&case=GLOB&status=S[,S...]: a glob with * or ? matches the whole
// name, other text any name holding it, either case-insensitive; statuses
// are those of a time comparison (regression, improvement, unchanged,
// inconclusive, no-baseline). `with_status` false: a status is refused, not ignored.
CaseFilter case_filter(const Request& request, bool with_status = true);
// The case-name part of a filter as an ILIKE pattern ("" for an empty glob).
std::string glob_to_like(const std::string& glob);

}  // namespace kw::server
