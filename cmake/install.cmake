# `cmake --install`: the library, its public headers and the CMake package that lets another
# project write
#   find_package(encore 0.1 CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE encore::encore)
# (tests/install/ checks exactly that, with the README's program).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The same name for projects that add this tree with add_subdirectory.
add_library(encore::encore ALIAS encore)
# Headers keep their folders under include/encore, so that programs include them as in this
# tree: "encore.h", "graph/trace.h".
target_include_directories(encore PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/encore>)
target_compile_features(encore PUBLIC cxx_std_20)
# An installed libencore finds the libraries it was linked with outside the system folders
# without LD_LIBRARY_PATH.
set_target_properties(encore PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)

install(TARGETS encore EXPORT encoreTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET encore_cuda)
  # The CUDA plugin goes next to libencore, which loads it from its own folder at run time
  # (core/backend.h). Nothing links it, so it is not part of the exported targets; it finds
  # libencore beside it and the CUDA libraries where it was linked with them.
  set_target_properties(encore_cuda PROPERTIES INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS encore_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
# The distributed engines too (core/dist.h), loaded from libencore's folder under a launcher.
foreach(plugin encore_mpi encore_nccl)
  if(TARGET ${plugin})
    set_target_properties(${plugin} PROPERTIES INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH TRUE)
    install(TARGETS ${plugin} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endforeach()

# The public headers are those a training program includes (encore.h, graph/trace.h,
# ops/autotune.h, train/compare.h) and every project header they include, followed at install time: a header
# that joins that set is installed without a list to keep in step.
install(CODE "
  include(\"${CMAKE_CURRENT_LIST_DIR}/public_headers.cmake\")
  encore_public_headers(headers \"${PROJECT_SOURCE_DIR}\" encore.h graph/trace.h ops/autotune.h train/compare.h)
  foreach(header IN LISTS headers)
    get_filename_component(folder \"\${header}\" DIRECTORY)
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}/encore/\${folder}\"
         TYPE FILE FILES \"${PROJECT_SOURCE_DIR}/\${header}\")
  endforeach()
")

set(ENCORE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/encore)
install(EXPORT encoreTargets NAMESPACE encore:: DESTINATION ${ENCORE_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/encoreConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/encoreConfig.cmake
                              INSTALL_DESTINATION ${ENCORE_CMAKE_DIR})
# 0.x: a minor version may break the API.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/encoreConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/encoreConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/encoreConfigVersion.cmake
        DESTINATION ${ENCORE_CMAKE_DIR})
