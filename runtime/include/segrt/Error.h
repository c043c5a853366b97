//===- Error.h - segrt errors -----------------------------------*- C++ -*-===//
#ifndef SEGRT_ERROR_H
#define SEGRT_ERROR_H

#include <stdexcept>
#include <string>

namespace segrt {

/// Every failure of the runtime: a missing driver or library, a driver error
/// (with the driver's own description), or a bad request.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace segrt

#endif // SEGRT_ERROR_H
