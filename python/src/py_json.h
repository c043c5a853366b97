//===- py_json.h - Python objects as JSON values for the C++ readers -*- C++ -*-===//
//
// The manifest readers are C++ and take JSON values; a Python caller's
// manifest entry (a dict of what lib/Target/Manifest.cpp wrote) crosses over
// as its JSON text, so there is one reader.
//
//===----------------------------------------------------------------------===//

#ifndef SEGOPS_PYTHON_PY_JSON_H
#define SEGOPS_PYTHON_PY_JSON_H

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

#include <string>

namespace segops_python {

inline nlohmann::json toJson(pybind11::handle value) {
  pybind11::object dumps = pybind11::module_::import("json").attr("dumps");
  return nlohmann::json::parse(dumps(value).cast<std::string>());
}

} // namespace segops_python

#endif // SEGOPS_PYTHON_PY_JSON_H
