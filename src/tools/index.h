/*
 * index.h - tiletool's index command (index.c): build the persisted index
 * store for a whole source ahead of a mount.
 */
#ifndef TILETOOL_INDEX_H
#define TILETOOL_INDEX_H

/* argv[0] is "index"; returns the exit status. */
int tiletool_index(int argc, char **argv);

#endif
