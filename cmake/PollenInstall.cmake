# Install and export rules: `cmake --install <build> --prefix <p>` installs
#   <p>/bin              pollend, pollenctl, pollen-sim (those that were built)
#   <p>/lib              the static libraries, one per layer
#   <p>/include          their headers, laid out as in the tree ("crdt/blocked_filter.h")
#                        plus the generated protocol/*.pb.h
#   <p>/lib/cmake/Pollen PollenConfig.cmake, PollenConfigVersion.cmake, PollenTargets.cmake
# so that a downstream project can
#   find_package(Pollen CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE Pollen::crdt)   # or Pollen::node_core, ...
# Exported names: Pollen::crdt, Pollen::protocol, Pollen::node_core,
# Pollen::sim_framework, Pollen::simulation, Pollen::resp_proto, Pollen::resp,
# Pollen::runtime_base, Pollen::runtime. Included last from the top-level
# CMakeLists.txt, once every library target exists; it only references them by
# name and adds install-time include paths, nothing else about how they build.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(POLLEN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Pollen)

# library target -> exported name, in dependency order.
set(_pollen_export_map
  pollen_crdt:crdt
  pollen_protocol:protocol
  pollen_node_core:node_core
  pollen_sim_framework:sim_framework
  pollen_simulation:simulation
  pollen_resp_proto:resp_proto
  pollen_resp:resp
  pollen_runtime_base:runtime_base
  pollen_runtime:runtime)

set(_pollen_libs)
foreach(pair ${_pollen_export_map})
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 target)
  list(GET pair 1 export_name)
  if(NOT TARGET ${target})
    continue()
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  # Include paths that point into the build tree (the generated protobuf
  # headers) are build-only; installed consumers use <prefix>/include.
  foreach(prop INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
    get_target_property(dirs ${target} ${prop})
    if(dirs)
      set(fixed)
      foreach(d ${dirs})
        if(d MATCHES "^\\$<" OR NOT (d MATCHES "^${CMAKE_BINARY_DIR}" OR d MATCHES "^${CMAKE_SOURCE_DIR}"))
          list(APPEND fixed "${d}")
        else()
          list(APPEND fixed "$<BUILD_INTERFACE:${d}>")
        endif()
      endforeach()
      set_target_properties(${target} PROPERTIES ${prop} "${fixed}")
    endif()
  endforeach()
  target_include_directories(${target} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  list(APPEND _pollen_libs ${target})
endforeach()

install(TARGETS ${_pollen_libs}
  EXPORT PollenTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)

foreach(exe pollend pollenctl pollen-sim)
  if(TARGET ${exe})
    install(TARGETS ${exe} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT bin)
  endif()
endforeach()

# Headers of the library layers (not tests, benchmarks or tools).
foreach(dir crdt protocol node/core node/runtime simulation)
  if(EXISTS ${CMAKE_SOURCE_DIR}/${dir})
    install(DIRECTORY ${CMAKE_SOURCE_DIR}/${dir}/
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${dir}
      COMPONENT dev
      FILES_MATCHING PATTERN "*.h" PATTERN "*.proto")
  endif()
endforeach()
if(TARGET pollen_protocol)
  install(DIRECTORY ${CMAKE_BINARY_DIR}/protocol/
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/protocol
    COMPONENT dev
    FILES_MATCHING PATTERN "*.pb.h"
    PATTERN "CMakeFiles" EXCLUDE)
endif()

install(EXPORT PollenTargets
  NAMESPACE Pollen::
  DESTINATION ${POLLEN_INSTALL_CMAKEDIR}
  COMPONENT dev)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/PollenConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/PollenConfig.cmake
  INSTALL_DESTINATION ${POLLEN_INSTALL_CMAKEDIR})
# 0.x: a minor version may break the API.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/PollenConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/PollenConfig.cmake ${CMAKE_BINARY_DIR}/cmake/PollenConfigVersion.cmake
  DESTINATION ${POLLEN_INSTALL_CMAKEDIR}
  COMPONENT dev)
