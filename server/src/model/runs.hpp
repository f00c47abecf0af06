// A run as the services see it: where it was stored, and the pages and
// filters its reads take.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace kw::server {

// Cases by page: page 1 holds ordinals [0, per_page).
struct Page {
  int number = 1;
  int per_page = 500;
  std::int64_t offset() const { return static_cast<std::int64_t>(number - 1) * per_page; }
};

// The cases a list keeps; each field empty keeps every case.
struct CaseFilter {
  std::string gpu_model;
  std::string name_like;  // an ILIKE pattern (case_filter() makes it from a glob)
  std::string statuses;   // comma-separated statuses of the case's time comparison
};

struct RunHead {
  std::string json;
  std::int64_t cases = 0;
};

struct CaseRowColumns;

struct StoredRun {
  std::int64_t run_id = 0;
  bool duplicate = false;  // the same report was stored before
  std::string verdict;
  // What RunRepository::store_cases writes once the run is judged.
  std::int64_t project_id = 0;
  std::shared_ptr<const CaseRowColumns> case_rows;
};

}  // namespace kw::server
