// The translation unit that builds tests/precompiled.h once (tests/CMakeLists.txt).
