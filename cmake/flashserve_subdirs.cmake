# flashserve_add_subdirectories(<dir>): add_subdirectory() for every folder directly under
# <dir> that has a CMakeLists.txt, in sorted order. Modules (a tool, a benchmark, a test
# folder) are discovered rather than listed so that adding one touches no shared file.
function(flashserve_add_subdirectories dir)
  file(GLOB _dirs LIST_DIRECTORIES true ${dir}/*)
  list(SORT _dirs)
  foreach(_dir ${_dirs})
    if(IS_DIRECTORY ${_dir} AND EXISTS ${_dir}/CMakeLists.txt)
      add_subdirectory(${_dir})
    endif()
  endforeach()
endfunction()
