# The Debian package: `cpack -G DEB` in a Release build directory writes
# pollen_<version>_amd64.deb with
#   /usr/bin/pollend, pollenctl, pollen-sim
#   /usr/lib/systemd/system/pollend.service   (ExecStart=/usr/bin/pollend ...)
#   /usr/share/pollen/pollend.conf            (the one-node default postinst copies to /etc/pollen)
#   /usr/share/doc/pollen/                    README, runbook, examples/pollend.example.conf
# and maintainer scripts (ops/debian/) that create the `pollen` system user,
# /etc/pollen/pollend.conf and /etc/pollen/secret when missing, and enable and
# start the unit where systemd runs. Dependencies: the shared libraries the
# binaries link (dpkg-shlibdeps) and adduser. tests/package/deb_test.sh builds,
# inspects, installs and runs it.
#
# The package's files are in install component `deb`, excluded from a plain
# `cmake --install` (which installs the binaries, libraries and headers).
set(_deb_stage ${CMAKE_BINARY_DIR}/deb)

# The unit in ops/systemd runs /usr/local/bin/pollend (a hand install); the
# package's runs /usr/bin/pollend, without the hand-install comment.
set(_unit_src ${CMAKE_SOURCE_DIR}/ops/systemd/pollend.service)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_unit_src})
file(READ ${_unit_src} _unit)
string(REPLACE "/usr/local/bin/pollend" "/usr/bin/pollend" _unit "${_unit}")
string(REGEX REPLACE "# Install:[^\n]*\n(#  [^\n]*\n)*" "" _unit "${_unit}")
file(WRITE ${_deb_stage}/pollend.service "${_unit}")

install(FILES ${_deb_stage}/pollend.service
  DESTINATION lib/systemd/system COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_SOURCE_DIR}/ops/debian/pollend.conf
  DESTINATION ${CMAKE_INSTALL_DATADIR}/pollen COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_SOURCE_DIR}/ops/pollend.example.conf
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/runbook.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT deb EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pollen)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Pollen developers <pollen@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "replicated Bloom filter cluster with a RedisBloom-compatible server")
set(CPACK_PACKAGE_DESCRIPTION "Pollen nodes each hold a lock-free blocked Bloom filter and replicate it by
gossip (a grow-only CRDT with coordinated epoch rotation). Clients speak RESP:
RedisBloom's BF.* commands answer locally in microseconds. Includes pollend
(the node), pollenctl (the admin CLI) and pollen-sim (the cluster simulator).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL bin deb)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_PACKAGE_NAME pollen)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${CMAKE_SOURCE_DIR}/ops/debian/postinst
  ${CMAKE_SOURCE_DIR}/ops/debian/prerm
  ${CMAKE_SOURCE_DIR}/ops/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
