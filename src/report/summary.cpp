#include "attnprof/report/summary.h"

#include <cmath>

#include "report/summary_schema.h"

namespace attnprof::report {
namespace {

using nlohmann::json;

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
json to_json_value(double v) { return number_or_null(v); }
json to_json_value(int v) { return v; }
json to_json_value(const char* v) { return v; }
json to_json_value(const std::string& v) { return v; }
json to_json_value(const std::optional<double>& v) { return v ? number_or_null(*v) : json(nullptr); }
json to_json_value(json v) { return v; }

// The writing visitor of summary_schema.h: builds the JSON object field by
// field. Objects are built in place (nlohmann's objects are std::maps, so the
// reference to a member stays valid while siblings are added); array elements
// are built aside and moved in.
class Writer {
 public:
  explicit Writer(json& root) : cur_(&root) {}

  template <class T>
  void integer(const char* key, const T& v, int64_t, int64_t) { (*cur_)[key] = v; }
  void number(const char* key, double v, double, double) { (*cur_)[key] = number_or_null(v); }
  void optional_number(const char* key, const std::optional<double>& v, double, double) {
    (*cur_)[key] = to_json_value(v);
  }
  void ns_as_us(const char* key, int64_t ns) { (*cur_)[key] = double(ns) / 1000.0; }
  void string(const char* key, const std::string& v) { (*cur_)[key] = v; }
  void boolean(const char* key, bool v) { (*cur_)[key] = v; }
  void flag(const char* key, bool v) { (*cur_)[key] = v; }
  template <class T>
  void integer_or_zero(const char* key, const T& v, int64_t lo, int64_t hi) { integer(key, v, lo, hi); }
  template <class E, class Name, class Parse>
  void enumeration(const char* key, const E& v, Name name, Parse, const char*) { (*cur_)[key] = name(v); }
  template <class F>
  void object(const char* key, F&& fn) {
    json& o = (*cur_)[key] = json::object();
    within(o, fn);
  }
  template <class T, class F>
  void optional_object(const char* key, const std::optional<T>& v, F&& fn) {
    if (!v) {
      (*cur_)[key] = nullptr;
      return;
    }
    json& o = (*cur_)[key] = json::object();
    within(o, [&] { fn(*v); });
  }
  void later_optional_number(const char* key, const std::optional<double>& v, double lo, double hi) {
    optional_number(key, v, lo, hi);
  }
  template <class T, class F>
  void later_optional_object(const char* key, const std::optional<T>& v, F&& fn) {
    optional_object(key, v, fn);
  }
  template <class T, class F>
  void array(const char* key, const std::vector<T>& v, F&& fn) {
    json a = json::array();
    for (const T& x : v) {
      json e = json::object();
      within(e, [&] { fn(x); });
      a.push_back(std::move(e));
    }
    (*cur_)[key] = std::move(a);
  }
  void string_list(const char* key, const std::vector<std::string>& v) { (*cur_)[key] = v; }
  void int_list(const char* key, const std::vector<int64_t>& v, int64_t, int64_t, size_t) { (*cur_)[key] = v; }
  void string_map(const char* key, const std::vector<std::pair<std::string, std::string>>& v) {
    json o = json::object();
    for (const auto& [k, x] : v) o[k] = x;
    (*cur_)[key] = std::move(o);
  }
  void int_triple(const char* key, const int (&v)[3], int, int) { (*cur_)[key] = {v[0], v[1], v[2]}; }
  template <class F>
  void derived(const char* key, F&& fn) { (*cur_)[key] = to_json_value(fn()); }

 private:
  template <class F>
  void within(json& o, F&& fn) {
    json* saved = cur_;
    cur_ = &o;
    fn();
    cur_ = saved;
  }
  json* cur_;
};

}  // namespace

json summary_json(const RunRecord& r) {
  json out = json::object();
  Writer w(out);
  schema::summary_fields(w, r);
  return out;
}

json ceilings_json(const DeviceCeilings& c) {
  json out = json::object();
  Writer w(out);
  schema::ceilings_fields(w, c);
  return out;
}

json problem_json(const Problem& p) {
  json out = json::object();
  Writer w(out);
  schema::problem_fields(w, p);
  return out;
}

}  // namespace attnprof::report
