# gevoConfigVersion.cmake: the version find_package(gevo <version>) checks,
# that of the gevo workspace (Cargo.toml). Before 1.0, a request is
# compatible with this version when major and minor match and the requested
# patch level is not newer.
set(PACKAGE_VERSION "0.1.0")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)
if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
if(NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION
    AND PACKAGE_FIND_VERSION_MAJOR EQUAL 0
    AND PACKAGE_FIND_VERSION_MINOR EQUAL 1)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
