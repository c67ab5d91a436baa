#include "qloom/io/hub_api.h"

#include <nlohmann/json.hpp>

#include "qloom/core/format.h"
#include "qloom/io/hub_error.h"
#include "qloom/io/hub_names.h"
#include "qloom/io/model_dir.h"
#include "qloom/io/hub_strings.h"

namespace qloom::io {
namespace {

std::optional<uint64_t> parse_size(const std::string& v) {
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 19)
    return std::nullopt;
  return std::stoull(v);
}

std::string token_remedy(const HubSettings& s) {
  if (!s.token.empty())
    return cat({"the token (from HF_TOKEN or ", s.token_file.string(),
                ") was rejected or lacks access: check it, or request access on the repo's page"});
  std::string r = "if the repo is private or gated, pass a token: export HF_TOKEN=hf_... or run `hf auth login` (writes ";
  r += s.token_file.string();
  r += ")";
  return r;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void bad_size(const HubId& id, const std::string& file, const std::string& why) {
  throw HubError(HubFailure::kBadResponse, id.display(), file, why,
                 "check HF_ENDPOINT (and any proxy in between); nothing was downloaded");
}

}  // namespace

bool is_hub_text_file(const std::string& name) {
  const size_t slash = name.rfind('/');
  const std::string base = slash == std::string::npos ? name : name.substr(slash + 1);
  for (const char* s : {".json", ".jinja", ".txt", ".md", ".yaml", ".yml"})
    if (ends_with(base, s)) return true;
  return is_tokenizer_file(base);
}

void settle_hub_file_size(HubFileMeta& m, std::optional<uint64_t> listed, const HubId& id) {
  for (const auto& size : {m.size, listed})
    if (is_hub_text_file(m.name) && size && *size > kMaxHubTextFileBytes)
      bad_size(id, m.name,
               cat({"the server announces ", std::to_string(*size), " bytes (", format_bytes(*size),
                    ") for a text file; the limit is ", format_bytes(kMaxHubTextFileBytes)}));
  if (listed && m.size && *m.size != *listed)
    bad_size(id, m.name,
             cat({"the repo listing gives ", std::to_string(*listed), " bytes but the file's headers announce ",
                  std::to_string(*m.size)}));
  if (listed) m.size = listed;
  if (!m.size && !is_hub_text_file(m.name))
    bad_size(id, m.name, "neither the repo listing nor the file's headers give its size");
}

uint64_t hub_download_limit(const HubFileMeta& m) { return m.size.value_or(kMaxHubTextFileBytes); }

std::string normalize_etag(const std::string& etag) {
  std::string e = etag;
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

std::string hub_file_url(const std::string& endpoint, const HubId& id, const std::string& revision,
                         const std::string& file) {
  std::string url = endpoint;
  url += '/';
  url += id.repo_id();
  url += "/resolve/";
  url += HttpClient::encode(revision, false);
  url += '/';
  url += HttpClient::encode(file, true);
  return url;
}

void throw_hub_http_error(const HttpResult& r, const HubSettings& s, const HubId& id,
                          const std::string& file) {
  const std::string where = id.display();
  if (!r.transport_ok) {
    std::string msg = "cannot reach ";
    msg += s.endpoint;
    msg += " (";
    msg += r.error;
    msg += ")";
    throw HubError(HubFailure::kNetwork, where, file, msg);
  }
  const std::string code = r.header("x-error-code"), server_msg = r.header("x-error-message");
  std::string detail = cat({" (HTTP ", std::to_string(r.status)});
  if (!server_msg.empty()) {
    detail += ": ";
    detail += server_msg;
  }
  detail += ")";
  if (r.status == 401)
    throw HubError(HubFailure::kUnauthorized, where, file,
                   cat({"the hub refused anonymous or token access", detail,
                        ": the repo is private, gated or does not exist"}),
                   token_remedy(s));
  if (r.status == 403)
    throw HubError(HubFailure::kForbidden, where, file,
                   cat({"access denied", detail, ": the repo is gated or private"}), token_remedy(s));
  if (r.status == 404) {
    if (code == "RevisionNotFound")
      throw HubError(HubFailure::kRevisionNotFound, where, file,
                     cat({"revision '", id.revision, "' not found", detail}),
                     "check the branch, tag or commit after '@'");
    if (code == "EntryNotFound" || (code.empty() && !file.empty()))
      throw HubError(HubFailure::kFileNotFound, where, file, cat({"file not found in the repo", detail}),
                     "check that the repo holds a HuggingFace model (config.json)");
    throw HubError(HubFailure::kRepoNotFound, where, file,
                   cat({"repository not found on ", s.endpoint, detail}),
                   cat({"check the id (org/name); ", token_remedy(s)}));
  }
  throw HubError(HubFailure::kBadResponse, where, file,
                 cat({"unexpected answer from ", s.endpoint, detail}), "try again later");
}

HubListing fetch_listing(HttpClient& http, const HubSettings& s, const HubId& id) {
  std::string url = s.endpoint;
  url += "/api/models/";
  url += id.repo_id();
  url += "/revision/";
  url += HttpClient::encode(id.revision, false);
  url += "?blobs=true";
  const HttpResult r = http.get_text(url);
  if (!r.transport_ok || r.status != 200) throw_hub_http_error(r, s, id, "");
  HubListing out;
  try {
    const auto j = nlohmann::json::parse(r.body);
    out.commit = j.at("sha").get<std::string>();
    for (const auto& sib : j.value("siblings", nlohmann::json::array())) {
      HubRepoFile f;
      f.name = sib.at("rfilename").get<std::string>();
      if (sib.contains("size") && sib["size"].is_number_unsigned()) f.size = sib["size"].get<uint64_t>();
      if (sib.contains("lfs") && sib["lfs"].is_object()) {
        f.lfs_sha256 = sib["lfs"].value("sha256", "");
        if (sib["lfs"].contains("size") && sib["lfs"]["size"].is_number_unsigned())
          f.size = sib["lfs"]["size"].get<uint64_t>();
      }
      out.files.push_back(std::move(f));
    }
  } catch (const nlohmann::json::exception& e) {
    throw HubError(HubFailure::kBadResponse, url, "", cat({"malformed repo listing: ", e.what()}),
                   "check that HF_ENDPOINT points at a Hugging Face Hub");
  }
  if (out.commit.empty())
    throw HubError(HubFailure::kBadResponse, url, "sha", "the repo listing names no commit",
                   "check that HF_ENDPOINT points at a Hugging Face Hub");
  check_hub_commit(out.commit, url, "sha");
  for (const auto& f : out.files) check_hub_file_name(f.name, url);
  return out;
}

HubFileMeta fetch_file_meta(HttpClient& http, const HubSettings& s, const HubId& id,
                            const std::string& revision, const std::string& file) {
  const std::string url = hub_file_url(s.endpoint, id, revision, file);
  const HttpResult r = http.head(url);
  const bool redirect = r.status >= 300 && r.status < 400 && !r.header("location").empty();
  if (!r.transport_ok || !(r.status == 200 || redirect)) throw_hub_http_error(r, s, id, file);
  HubFileMeta m;
  m.name = file;
  m.commit = r.header("x-repo-commit");
  std::string etag = r.header("x-linked-etag");
  if (etag.empty()) etag = r.header("etag");
  m.etag = normalize_etag(etag);
  m.size = parse_size(r.header("x-linked-size"));
  if (!m.size && !redirect) m.size = parse_size(r.header("content-length"));
  // A regular file is fetched by commit, so a branch moving in between cannot mix versions.
  m.url = redirect ? r.header("location")
                   : (m.commit.empty() ? r.url : hub_file_url(s.endpoint, id, m.commit, file));
  if (m.commit.empty())
    throw HubError(HubFailure::kBadResponse, url, file,
                   "the answer has no X-Repo-Commit header: not a Hugging Face Hub endpoint",
                   "check HF_ENDPOINT (and any proxy in between)");
  check_hub_commit(m.commit, url, "X-Repo-Commit");
  check_hub_etag(m.etag, url, file);
  if (redirect) check_hub_location(m.url, url, file);
  return m;
}

}  // namespace qloom::io
