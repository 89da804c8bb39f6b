# Locates LibTorch through a Python that has the `torch` wheel installed, the way the wheel
# documents it (torch.utils.cmake_prefix_path). scripts/install-deps.sh installs the pinned wheel
# into a fixed venv; on machines with a preinstalled torch, plain python3 is used.
set(SHARDSCOPE_TORCH_VERSION "2.11.0" CACHE STRING "Pinned torch wheel version")
set(_default_python "/opt/shardscope/torch-${SHARDSCOPE_TORCH_VERSION}/bin/python")
if(NOT EXISTS "${_default_python}")
  set(_default_python "python3")
endif()
set(SHARDSCOPE_PYTHON "${_default_python}" CACHE FILEPATH "Python interpreter that has torch")

if(NOT Torch_DIR)
  execute_process(
    COMMAND "${SHARDSCOPE_PYTHON}" -c "import torch; print(torch.utils.cmake_prefix_path, end='')"
    OUTPUT_VARIABLE _torch_prefix
    RESULT_VARIABLE _torch_rc
    ERROR_VARIABLE _torch_err)
  if(NOT _torch_rc EQUAL 0)
    message(FATAL_ERROR "Cannot import torch with ${SHARDSCOPE_PYTHON}: ${_torch_err}\n"
                        "Run scripts/install-deps.sh first.")
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
endif()

# The wheel is CUDA-enabled; its CMake config looks for the toolkit. Ours is optional at run time.
find_package(Torch REQUIRED)
message(STATUS "LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")

execute_process(
  COMMAND "${SHARDSCOPE_PYTHON}" -c "import torch; print(torch.__version__, end='')"
  OUTPUT_VARIABLE SHARDSCOPE_TORCH_FOUND_VERSION)
