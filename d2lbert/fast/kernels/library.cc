// The entry point MXNet calls when it loads d2lbert's kernel library
// (mx.library.load); the operators register themselves (REGISTER_OP in each file).
#include "mxnet/lib_api.h"

mxnet::ext::MXReturnValue initialize(int version) { return mxnet::ext::MX_SUCCESS; }
