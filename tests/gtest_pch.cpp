// The program that owns the precompiled GoogleTest header the test programs
// share (tests/CMakeLists.txt).  It has no cases and is never run.
