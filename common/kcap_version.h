/*
 * kcap_version.h — the one version string of kcap: the CLI's -V, every snapshot's
 * kcap_version, the JSON documents and the Python package's metadata (the Makefile reads it
 * from here).
 */
#ifndef KCAP_VERSION_H
#define KCAP_VERSION_H

#define KCAP_VERSION "0.1.0"

#endif
