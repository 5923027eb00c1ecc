// no library
