#include "store/settings_repository.hpp"

namespace kw::server {

namespace {

const char* nullable_c_str(const std::optional<std::string>& text) {
  return text ? text->c_str() : nullptr;
}

}  // namespace

ProjectSettings SettingsRepository::get(pqxx::work& tx, std::int64_t project_id) {
  pqxx::row row = tx.exec_params1(
      "SELECT name, default_branch, min_threshold, COALESCE(github_repo, ''), COALESCE(webhook_url, ''), "
      "run_alpha, COALESCE(gitlab_project, ''), energy_threshold, inconclusive_gate, inconclusive_factor "
      "FROM projects WHERE id = $1",
      project_id);
  ProjectSettings settings;
  settings.id = project_id;
  settings.name = row[0].as<std::string>();
  settings.default_branch = row[1].as<std::string>();
  settings.min_threshold = row[2].as<double>();
  settings.github_repo = row[3].as<std::string>();
  settings.webhook_url = row[4].as<std::string>();
  settings.run_alpha = row[5].as<double>();
  settings.gitlab_project = row[6].as<std::string>();
  settings.energy_threshold = row[7].as<double>();
  settings.inconclusive_gate = row[8].as<std::string>();
  settings.inconclusive_factor = row[9].as<double>();
  for (const auto& c :
       tx.exec_params("SELECT case_name, min_threshold FROM case_settings WHERE project_id = $1", project_id))
    settings.case_thresholds[c[0].as<std::string>()] = c[1].as<double>();
  return settings;
}

ProjectSettings SettingsRepository::update(pqxx::work& tx, std::int64_t project_id,
                                           const SettingsChange& change) {
  if (change.default_branch)
    tx.exec_params0("UPDATE projects SET default_branch = $2 WHERE id = $1", project_id,
                    *change.default_branch);
  if (change.min_threshold)
    tx.exec_params0("UPDATE projects SET min_threshold = $2 WHERE id = $1", project_id,
                    *change.min_threshold);
  if (change.energy_threshold)
    tx.exec_params0("UPDATE projects SET energy_threshold = $2 WHERE id = $1", project_id,
                    *change.energy_threshold);
  if (change.run_alpha)
    tx.exec_params0("UPDATE projects SET run_alpha = $2 WHERE id = $1", project_id, *change.run_alpha);
  if (change.inconclusive_gate)
    tx.exec_params0("UPDATE projects SET inconclusive_gate = $2 WHERE id = $1", project_id,
                    *change.inconclusive_gate);
  if (change.inconclusive_factor)
    tx.exec_params0("UPDATE projects SET inconclusive_factor = $2 WHERE id = $1", project_id,
                    *change.inconclusive_factor);
  for (const auto& [case_name, threshold] : change.case_thresholds) {
    if (threshold) {
      tx.exec_params0(
          "INSERT INTO case_settings (project_id, case_name, min_threshold) VALUES ($1, $2, $3) "
          "ON CONFLICT (project_id, case_name) DO UPDATE SET min_threshold = EXCLUDED.min_threshold",
          project_id, case_name, *threshold);
    } else {
      tx.exec_params0("DELETE FROM case_settings WHERE project_id = $1 AND case_name = $2", project_id,
                      case_name);
    }
  }
  if (change.github_repo)
    tx.exec_params0("UPDATE projects SET github_repo = $2 WHERE id = $1", project_id,
                    nullable_c_str(*change.github_repo));
  if (change.webhook_url)
    tx.exec_params0("UPDATE projects SET webhook_url = $2 WHERE id = $1", project_id,
                    nullable_c_str(*change.webhook_url));
  if (change.gitlab_project)
    tx.exec_params0("UPDATE projects SET gitlab_project = $2 WHERE id = $1", project_id,
                    nullable_c_str(*change.gitlab_project));
  return get(tx, project_id);
}

}  // namespace kw::server
