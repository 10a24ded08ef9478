// SwiftPM needs a source file in a C target; the header holds everything.
#include "CHaulSystem.h"
