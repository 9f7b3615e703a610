// libpq, PostgreSQL's C client library, used as it is: nothing is added here.
#ifndef CSESSIONKITPOSTGRES_SHIM_H
#define CSESSIONKITPOSTGRES_SHIM_H

#include <libpq-fe.h>

#endif
