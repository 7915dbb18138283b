#include "caps/caps.h"
#include <stdio.h>
#include <arpa/inet.h>
int main(void){
 const char *never[]={"net.connect:93.184.216.34:*","net.connect:93.184.216.0/24:*","net.connect:db.corp.example:5432","net.connect:[2606:2800::1]:*"};
 const char *req[]={"net.connect:[64:ff9b::5db8:d822]:443","net.connect:[2002:5db8:d822::]/48:*","net.connect:[::5db8:d822]:443","net.connect:[::ffff:0:5db8:d822]:443","net.connect:93.184.216.34:443","net.connect:10.0.0.0/8:5432","net.connect:db.corp.example.:5432","net.connect:DB.corp.example:5432","net.connect:*.example:5432"};
 for(int i=0;i<4;i++) for(int j=0;j<9;j++){ struct cap *a,*b; if(cap_parse(never[i],&a)){printf("bad %s\n",never[i]);continue;} int e=cap_parse(req[j],&b); if(e){printf("  parse fail %s (%d)\n",req[j],e);continue;}
  printf("never %-32s req %-40s meets=%d\n",never[i],req[j],cap_intersects(a,b)); }
}
