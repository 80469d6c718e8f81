// export and import: a topic's jobs as JSON lines, every state, for backups
// and migrations.
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "cli/output.h"
#include "redisched/client.h"
#include "wire/job_json.h"

namespace redisched::cli {
namespace {

namespace json = boost::json;

struct TransferArgs {
  std::string topic, file;
  bool replace = false;
};

int export_topic(Session& s, const TransferArgs& a) {
  auto& client = s.client();
  std::ofstream out_file;
  if (!a.file.empty()) {
    out_file.open(a.file);
    if (!out_file) throw Error(Errc::invalid_argument, "cannot write " + a.file);
  }
  std::ostream& out = a.file.empty() ? std::cout : out_file;
  const auto st = client.stats(a.topic);
  Progress progress("exported", st.delayed + st.ready + st.reserved + st.dead + st.done);
  for (JobState state :
       {JobState::delayed, JobState::ready, JobState::reserved, JobState::dead, JobState::done}) {
    for (std::int64_t offset = 0;; offset += 1000) {
      auto page = client.list(a.topic, state, offset, 1000);
      for (const auto& j : page.jobs) out << wire::job_text(j) << "\n";
      progress.add(static_cast<std::int64_t>(page.jobs.size()));
      if (page.jobs.size() < 1000) break;
    }
  }
  out.flush();
  progress.done();
  if (!out) throw Error(Errc::invalid_argument, "writing the export failed");
  return 0;
}

// Every line is read and checked before the first job goes in, so a bad
// line stops the import with nothing imported.
std::vector<Job> read_jobs(std::istream& in) {
  std::vector<Job> jobs;
  std::int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty()) continue;
    try {
      boost::system::error_code ec;
      auto value = json::parse(line, ec);
      if (ec || !value.is_object()) throw std::runtime_error("not a JSON object");
      jobs.push_back(wire::job_from_json(value.as_object(), line));
    } catch (const std::exception& e) {
      throw Error(Errc::invalid_argument,
                  "line " + std::to_string(line_no) + ": " + e.what() + " (nothing was imported)");
    }
  }
  return jobs;
}

int import_topic(Session& s, const TransferArgs& a) {
  auto& client = s.client();
  std::ifstream in_file;
  if (!a.file.empty()) {
    in_file.open(a.file);
    if (!in_file) throw Error(Errc::invalid_argument, "cannot read " + a.file);
  }
  const std::vector<Job> jobs = read_jobs(a.file.empty() ? std::cin : in_file);
  Progress progress("imported", static_cast<std::int64_t>(jobs.size()));
  std::int64_t restored = 0, skipped = 0;
  // Many restores in flight on the pipeline, a window at a time.
  constexpr std::size_t kWindow = 1000;
  for (std::size_t at = 0; at < jobs.size(); at += kWindow) {
    std::vector<std::future<bool>> window;
    const std::size_t end = std::min(jobs.size(), at + kWindow);
    for (std::size_t i = at; i < end; ++i) {
      window.push_back(client.restore_async(a.topic, jobs[i], a.replace));
    }
    for (std::size_t i = at; i < end; ++i) {
      try {
        (window[i - at].get() ? restored : skipped) += 1;
      } catch (const Error& e) {
        throw Error(e.code(), "job " + jobs[i].id + ": " + e.what() + " (" +
                                  std::to_string(restored + skipped) +
                                  " jobs before it were imported or skipped)");
      }
    }
    progress.add(static_cast<std::int64_t>(end - at));
  }
  progress.done();
  if (s.json()) {
    print_json(json::object{{"restored", restored}, {"skipped", skipped}});
  } else {
    std::cout << "restored " << restored << ", skipped " << skipped
              << " (existing ids, or finished jobs)\n";
  }
  return 0;
}

}  // namespace

void add_transfer_commands(CLI::App& app, Action& selected) {
  auto e = std::make_shared<TransferArgs>();
  auto* exp = app.add_subcommand(
      "export", "write a topic's jobs, every state, as JSON lines (for backups and migrations)");
  exp->add_option("topic", e->topic)->required();
  exp->add_option("-o,--output", e->file, "file to write (default: stdout)");
  exp->callback([e, &selected] { selected = [e](Session& s) { return export_topic(s, *e); }; });

  auto i = std::make_shared<TransferArgs>();
  auto* imp = app.add_subcommand(
      "import", "load jobs written by export into a topic, as they were (reserved ones ready)");
  imp->add_option("topic", i->topic)->required();
  imp->add_option("file", i->file, "JSON lines to read (default: stdin)");
  imp->add_flag("--replace", i->replace, "overwrite jobs whose id exists (else they are skipped)");
  imp->callback([i, &selected] { selected = [i](Session& s) { return import_topic(s, *i); }; });
}

}  // namespace redisched::cli
