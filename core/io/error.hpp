#pragma once
// Errors the core throws. Every message says what went wrong and, where it
// applies, the file, the line and what was expected, so a user can act on it.
#include <stdexcept>
#include <string>

namespace attnviz {

/// Base class of all attnviz errors; what() is meant to be shown to a user.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// A file could not be read, or its contents are not what was expected.
class FileError : public Error {
public:
    using Error::Error;
};

/// A configuration value is out of range or inconsistent with another.
class ConfigError : public Error {
public:
    using Error::Error;
};

/// Training could not go on (e.g. the loss became NaN or infinite).
class TrainingError : public Error {
public:
    using Error::Error;
};

/// Work stopped because its caller asked it to (a progress callback answered false).
class Cancelled : public Error {
public:
    using Error::Error;
};

}  // namespace attnviz
