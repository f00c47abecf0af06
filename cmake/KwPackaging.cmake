# `cpack` in a build directory makes Debian packages for hosts:
#   kw         /usr/bin/kw (the agent and CI client; only the C library needed),
#              /usr/share/kernelwatch/python/kwbench.py
#   kw-server  /usr/bin/kw-server, the dashboard and the kw it hands out to CI
#              jobs in /usr/share/kernelwatch, example systemd units
# The package tests (ci/tests/package_test.sh) build, inspect and run them.
if(TARGET kw)
  install(PROGRAMS "${KW_DIST_BINARY}" DESTINATION bin COMPONENT kw)
  install(FILES ci/systemd/kw-agent.service DESTINATION share/kernelwatch/systemd COMPONENT kw)
  # The python harness at a stable path, for a bench run by hand (kw carries
  # it too and puts it on a python bench's PYTHONPATH: kw harness-path).
  install(FILES kernels/python/kwbench.py DESTINATION share/kernelwatch/python COMPONENT kw)
endif()
if(TARGET kw-server)
  install(TARGETS kw-server RUNTIME DESTINATION bin COMPONENT server)
  if(TARGET dashboard)  # built only where node and dashboards/node_modules are
    install(DIRECTORY dashboards/dist/ DESTINATION share/kernelwatch/dashboard COMPONENT server)
  endif()
  install(FILES ci/systemd/kw-server.service DESTINATION share/kernelwatch/systemd COMPONENT server)
  if(TARGET kw)
    install(PROGRAMS "${KW_DIST_BINARY}" DESTINATION share/kernelwatch COMPONENT server)
  endif()
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kernelwatch)
set(CPACK_PACKAGE_VENDOR kernelwatch)
set(CPACK_PACKAGE_CONTACT "kernelwatch maintainers <kernelwatch@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL kw server)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Depends: from the libraries the binaries link (dpkg-shlibdeps), plus the
# PostgreSQL server binaries the embedded database runs.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_KW_PACKAGE_NAME kw)
set(CPACK_DEBIAN_KW_DESCRIPTION "kernelwatch agent and CI client\n kw runs a commit's GPU benchmarks on a GPU host and gates CI on kw-server's verdict.")
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME kw-server)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "postgresql")
set(CPACK_DEBIAN_SERVER_DESCRIPTION "kernelwatch results server\n kw-server keeps GPU kernel benchmark history in PostgreSQL, flags regressions and serves the dashboard.")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
include(CPack)
